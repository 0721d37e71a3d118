package etcdtest

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CountingKV counts what reaches etcd through a client's KV: a test of a
// store that answers from what it follows or recorded checks it made no
// read.
type CountingKV struct {
	clientv3.KV

	// Gets counts every read; Ranges those of a range of keys (a prefix),
	// CountOnly those that only count. Txns counts the transactions.
	Gets, Ranges, CountOnly, Txns atomic.Int64
}

// Count makes cli's reads and transactions go through a CountingKV, and
// returns it.
func Count(cli *clientv3.Client) *CountingKV {
	kv := &CountingKV{KV: cli.KV}
	cli.KV = kv

	return kv
}

// Get counts the read and makes it.
func (c *CountingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	op := clientv3.OpGet(key, opts...)

	c.Gets.Add(1)

	if len(op.RangeBytes()) > 0 {
		c.Ranges.Add(1)
	}

	if op.IsCountOnly() {
		c.CountOnly.Add(1)
	}

	return c.KV.Get(ctx, key, opts...)
}

// Txn counts the transaction and begins it.
func (c *CountingKV) Txn(ctx context.Context) clientv3.Txn {
	c.Txns.Add(1)

	return c.KV.Txn(ctx)
}
