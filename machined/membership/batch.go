package membership

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A batcher joins the transactions of concurrent calls into one (a group
// commit). When a control plane is lost, the thousands of workers it held
// move to the others within seconds, and each of their entries is read
// and written again under the new control plane's session; a join storm
// writes as many first entries. One transaction each cost etcd a request,
// a round of raft or a read index, and an apply each, and every watcher of
// the list an event each; joined, they cost that once for up to
// MaxBatchOps compares and operations. etcd's client has no such thing:
// its Txn is one request.
//
// A call queues its transaction and waits; a goroutine takes what is
// queued, in order, as one transaction, and sends each call its share of
// the answer (the same revision, its own responses). Up to inFlight
// batches are under way at once, so that one slow round of etcd holds
// back only the calls of its batch. A call whose keys another in its
// batch, or in a batch under way, touches waits for a later one: no two
// calls of a transaction write or compare the same key, and the calls on
// one key are made in the order they came. When a joined transaction
// fails, or its compares do not all hold, each of its calls is made
// alone, so that every call gets the answer its own transaction would
// have had: a conflict stays its call's own. A lone call is made at once,
// with its own context, as it was before batching.
type batcher struct {
	kv clientv3.KV
	// timeout bounds a joined transaction, which no one call's context
	// bounds.
	timeout time.Duration
	// max bounds a transaction's compares and its operations (etcd's
	// --max-txn-ops).
	max int
	// inFlight bounds the batches under way at once.
	inFlight int

	mu    sync.Mutex
	queue []*queued
	// running counts the goroutines committing batches; busy holds the
	// keys of the batches under way, each with how many calls touch it.
	running int
	busy    map[string]int
}

// queued is one call's transaction, waiting in a batcher.
type queued struct {
	ctx  context.Context //nolint:containedctx // the call's own, for a transaction made alone
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	// keys are the keys the transaction compares and operates on; nil
	// when it cannot be joined (a range, a nested transaction).
	keys []string
	done chan struct{}
	res  txnResult
}

// txnResult is what a call's transaction answered.
type txnResult struct {
	succeeded bool
	// rev is the store's revision after the transaction: the mod revision
	// of what it wrote.
	rev       int64
	responses []*etcdserverpb.ResponseOp
	err       error
}

func newBatcher(kv clientv3.KV, timeout time.Duration, maxOps, inFlight int) *batcher {
	return &batcher{kv: kv, timeout: timeout, max: maxOps, inFlight: max(inFlight, 1), busy: map[string]int{}}
}

// txn commits cmps and ops as one transaction, joined with those of the
// calls made meanwhile, and returns its answer. It returns ctx's error if
// ctx ends first; the transaction may then still be made, as a
// transaction whose call gave up may be.
func (b *batcher) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) txnResult {
	q := &queued{ctx: ctx, cmps: cmps, ops: ops, keys: keysOf(cmps, ops), done: make(chan struct{})}

	b.mu.Lock()
	b.queue = append(b.queue, q)
	start := b.running < b.inFlight
	if start {
		b.running++
	}
	b.mu.Unlock()

	if start {
		go b.run()
	}

	select {
	case <-q.done:
		return q.res
	case <-ctx.Done():
		return txnResult{err: ctx.Err()}
	}
}

// run commits what is queued, batch after batch, until no batch can be
// taken.
func (b *batcher) run() {
	for {
		batch := b.next()
		if batch == nil {
			return
		}

		b.commit(batch)
		b.done(batch)
	}
}

// next takes the next batch out of the queue: the first call that still
// waits and touches no key of a batch under way, and after it, in order,
// those that fit and touch none of the batch's keys either. It answers the
// calls that gave up meanwhile, and returns nil, ending its goroutine,
// once no call can be taken (those left wait for a batch under way, whose
// goroutine takes them next).
func (b *batcher) next() []*queued {
	b.mu.Lock()
	defer b.mu.Unlock()

	var (
		batch, rest []*queued
		keys        = map[string]bool{}
		nCmps, nOps int
		full        bool
	)

	for _, q := range b.queue {
		if q.ctx.Err() != nil {
			q.res = txnResult{err: q.ctx.Err()}
			close(q.done)

			continue
		}

		var joins bool

		switch {
		case b.touchesBusy(q) || touches(keys, q.keys):
			// A call on a key under way, or already in this batch, waits:
			// the calls on one key are made in the order they came.
			for _, k := range q.keys {
				keys[k] = true
			}
		case len(batch) == 0:
			joins = true
		default:
			joins = !full && q.keys != nil && batch[0].keys != nil &&
				nCmps+len(q.cmps) <= b.max && nOps+len(q.ops) <= b.max
			// The batch is full once a call does not fit, so that the
			// calls behind it are not taken before it.
			full = full || !joins && q.keys != nil
		}

		if !joins {
			rest = append(rest, q)

			continue
		}

		batch = append(batch, q)
		nCmps, nOps = nCmps+len(q.cmps), nOps+len(q.ops)

		for _, k := range q.keys {
			keys[k] = true
			b.busy[k]++
		}
	}

	b.queue = rest
	if len(batch) == 0 {
		b.running--
	}

	return batch
}

// touchesBusy reports whether q touches a key of a batch under way. A call
// that cannot be joined (nil keys) touches none: its transaction is a range
// or a nested one, which etcd orders with the others as it did before.
func (b *batcher) touchesBusy(q *queued) bool {
	for _, k := range q.keys {
		if b.busy[k] > 0 {
			return true
		}
	}

	return false
}

// done releases the keys of batch, made.
func (b *batcher) done(batch []*queued) {
	b.mu.Lock()
	defer b.mu.Unlock()

	for _, q := range batch {
		for _, k := range q.keys {
			if b.busy[k]--; b.busy[k] <= 0 {
				delete(b.busy, k)
			}
		}
	}
}

// commit makes batch's transactions, joined when there are several.
func (b *batcher) commit(batch []*queued) {
	if len(batch) == 1 {
		q := batch[0]
		q.res = b.alone(q)
		close(q.done)

		return
	}

	var (
		cmps []clientv3.Cmp
		ops  []clientv3.Op
	)

	for _, q := range batch {
		cmps = append(cmps, q.cmps...)
		ops = append(ops, q.ops...)
	}

	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	resp, err := b.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()

	cancel()

	if err != nil || !resp.Succeeded || len(resp.Responses) != len(ops) {
		b.each(batch)

		return
	}

	off := 0

	for _, q := range batch {
		q.res = txnResult{succeeded: true, rev: resp.Header.GetRevision(), responses: resp.Responses[off : off+len(q.ops)]}
		off += len(q.ops)

		close(q.done)
	}
}

// each makes every call of batch alone, all at once, after their joined
// transaction failed.
func (b *batcher) each(batch []*queued) {
	var wg sync.WaitGroup

	for _, q := range batch {
		wg.Go(func() {
			q.res = b.alone(q)
			close(q.done)
		})
	}

	wg.Wait()
}

// alone makes q's transaction by itself, with its call's context.
func (b *batcher) alone(q *queued) txnResult {
	resp, err := b.kv.Txn(q.ctx).If(q.cmps...).Then(q.ops...).Commit()
	if err != nil {
		return txnResult{err: err}
	}

	return txnResult{succeeded: resp.Succeeded, rev: resp.Header.GetRevision(), responses: resp.Responses}
}

// keysOf lists the keys of cmps and ops, or nil when the transaction
// cannot be joined: it compares or operates on a range, or nests a
// transaction.
func keysOf(cmps []clientv3.Cmp, ops []clientv3.Op) []string {
	keys := make([]string, 0, len(cmps)+len(ops))

	for _, c := range cmps {
		if len(c.GetCompare().GetRangeEnd()) > 0 {
			return nil
		}

		keys = append(keys, string(c.KeyBytes()))
	}

	for _, op := range ops {
		if op.IsTxn() || len(op.RangeBytes()) > 0 {
			return nil
		}

		keys = append(keys, string(op.KeyBytes()))
	}

	return keys
}

// touches reports whether any of keys is in seen.
func touches(seen map[string]bool, keys []string) bool {
	for _, k := range keys {
		if seen[k] {
			return true
		}
	}

	return false
}
