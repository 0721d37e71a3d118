package etcdutil

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
func Scan(ctx context.Context, kv clientv3.KV, prefix string, page, limit int, each func(*mvccpb.KeyValue)) (int64, error) {
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	rev, n := int64(0), 0

	for {
		resp, err := kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(page)), clientv3.WithRev(rev))
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
