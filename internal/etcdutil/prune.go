// Package etcdutil holds what Aegis's stores in etcd do alike, and Leader:
// clientv3 spreads calls over its endpoints and has no way to send one to
// etcd's leader, the only member that renews a lease.
package etcdutil

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Prune deletes the keys under prefix whose value expired reports true,
// and returns how many it deleted. Each deletion compares the key's
// modification revision with the one read, so a key written in between is
// left alone and judged again at the next prune. An error is the etcd
// client's, returned with the count so far; the caller maps it.
func Prune(ctx context.Context, kv clientv3.KV, prefix string, expired func(value []byte) bool) (int, error) {
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}

	n := 0

	for _, item := range resp.Kvs {
		if !expired(item.Value) {
			continue
		}

		key := string(item.Key)

		del, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", item.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return n, err
		}

		if del.Succeeded {
			n++
		}
	}

	return n, nil
}
