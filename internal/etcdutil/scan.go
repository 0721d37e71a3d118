package etcdutil

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrTooMany is Scan's refusal of a prefix that holds more keys than the
// caller allows.
var ErrTooMany = errors.New("etcdutil: more keys than allowed")

// Scan calls each with every key under prefix, in key order, reading pages
// of at most page keys, all at the revision of the first read, which it
// returns: the whole prefix as one snapshot whatever its size, each reply
// small. It refuses (ErrTooMany) a prefix of more than max keys once it has
// read past them, rather than hand back the first part of it. An error of
// the etcd client is returned as it is; the caller maps it.
//
// The first page is a linearizable read, which is what makes the snapshot
// current; the pages after it are read at its revision from whichever
// member the client asks, without a round of raft (serializable): the
// contents of a revision are the same at every member that has it, and a
// member that has not applied it yet says so (rpctypes.ErrFutureRev), when
// the page is read linearizable instead. Each linearizable page waited for
// a confirmation of the leader's leadership and its apply: under the
// heartbeats of 10,000 workers, 100–270 ms a page, 20 pages a read.
func Scan(ctx context.Context, kv clientv3.KV, prefix string, page, limit int, each func(*mvccpb.KeyValue)) (int64, error) {
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	rev, n := int64(0), 0

	for {
		resp, err := readPage(ctx, kv, from, end, page, rev)
		if err != nil {
			return 0, err
		}

		// A reply's header carries the store's revision now, not the one
		// read at: keep the first read's.
		if rev == 0 {
			rev = resp.Header.Revision
		}

		if n += len(resp.Kvs); n > limit {
			return 0, fmt.Errorf("%w: %s holds more than %d", ErrTooMany, prefix, limit)
		}

		for _, item := range resp.Kvs {
			each(item)
		}

		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}

		// The next page starts just after the last key read.
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// readPage reads one page of at most page keys from from to end at rev,
// serializable unless rev is 0 (the first page) or the member asked has
// not applied rev yet.
func readPage(ctx context.Context, kv clientv3.KV, from, end string, page int, rev int64) (*clientv3.GetResponse, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(page)), clientv3.WithRev(rev)}

	if rev != 0 {
		resp, err := kv.Get(ctx, from, append(opts, clientv3.WithSerializable())...)
		if !errors.Is(rpctypes.Error(err), rpctypes.ErrFutureRev) {
			return resp, err
		}
	}

	return kv.Get(ctx, from, opts...)
}
