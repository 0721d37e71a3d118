package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

// gatedKV is an etcd KV whose first transaction waits for open, so that
// the calls made meanwhile queue behind it, and which records the
// operations of every transaction it commits.
type gatedKV struct {
	clientv3.KV
	open  chan struct{}
	first atomic.Bool

	// failJoined fails the first transaction of more than one operation
	// without sending it, as a request lost with its connection.
	failJoined atomic.Bool

	mu   sync.Mutex
	txns []int // operations of each transaction committed
}

func (k *gatedKV) Txn(ctx context.Context) clientv3.Txn {
	if k.first.CompareAndSwap(false, true) {
		<-k.open
	}

	return &countedTxn{Txn: k.KV.Txn(ctx), kv: k}
}

func (k *gatedKV) committed() []int {
	k.mu.Lock()
	defer k.mu.Unlock()

	return slices.Clone(k.txns)
}

type countedTxn struct {
	clientv3.Txn
	kv  *gatedKV
	ops int
}

func (t *countedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *countedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.ops += len(ops)
	t.Txn = t.Txn.Then(ops...)

	return t
}

func (t *countedTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	t.kv.txns = append(t.kv.txns, t.ops)
	t.kv.mu.Unlock()

	if t.ops > 1 && t.kv.failJoined.CompareAndSwap(true, false) {
		return nil, errors.New("connection lost")
	}

	return t.Txn.Commit()
}

// queuedBehind starts the first call of calls, which holds the batcher's
// first transaction until the others are queued, then the others, and
// returns every call's answer, in the order of calls.
func queuedBehind(t *testing.T, b *batcher, kv *gatedKV, calls []func() txnResult) []txnResult {
	t.Helper()

	res := make([]txnResult, len(calls))

	var wg sync.WaitGroup

	wg.Go(func() { res[0] = calls[0]() })

	waitQueued(t, b, 0) // the first is taken and waits at the gate

	for i := 1; i < len(calls); i++ {
		wg.Go(func() { res[i] = calls[i]() })
	}

	waitQueued(t, b, len(calls)-1)
	close(kv.open)
	wg.Wait()

	return res
}

// waitQueued waits until n calls wait in b's queue.
func waitQueued(t *testing.T, b *batcher, n int) {
	t.Helper()

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		queued, running := len(b.queue), b.running
		b.mu.Unlock()

		if queued == n && running > 0 {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", queued, n)
		}
	}
}

func putCall(ctx context.Context, b *batcher, k, v string, rev int64) func() txnResult {
	return func() txnResult {
		return b.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", rev)}, []clientv3.Op{clientv3.OpPut(k, v)})
	}
}

func TestBatcher(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	ctx := t.Context()

	newGated := func(maxOps int) (*batcher, *gatedKV) {
		kv := &gatedKV{KV: cli, open: make(chan struct{})}

		return newBatcher(kv, 5*time.Second, maxOps, 1), kv
	}

	value := func(t *testing.T, k string) string {
		t.Helper()

		resp, err := cli.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}

		if len(resp.Kvs) == 0 {
			return ""
		}

		return string(resp.Kvs[0].Value)
	}

	t.Run("calls made meanwhile are one transaction", func(t *testing.T) {
		b, kv := newGated(MaxBatchOps)

		calls := []func() txnResult{putCall(ctx, b, "/joined/first", "1", 0)}
		for i := range 50 {
			calls = append(calls, putCall(ctx, b, fmt.Sprintf("/joined/%d", i), "v", 0))
		}

		res := queuedBehind(t, b, kv, calls)

		for i, r := range res {
			if r.err != nil || !r.succeeded || len(r.responses) != 1 || r.responses[0].GetResponsePut() == nil {
				t.Fatalf("call %d: %+v", i, r)
			}
		}

		if got := kv.committed(); !slices.Equal(got, []int{1, 50}) {
			t.Fatalf("transactions of %v operations, want the first alone and the 50 others joined", got)
		}

		if res[1].rev != res[50].rev || res[0].rev == res[1].rev {
			t.Fatalf("revisions %d, %d, %d: want the joined calls at one", res[0].rev, res[1].rev, res[50].rev)
		}

		if v := value(t, "/joined/49"); v != "v" {
			t.Fatalf("/joined/49 = %q", v)
		}
	})

	t.Run("a conflict stays its call's own", func(t *testing.T) {
		b, kv := newGated(MaxBatchOps)

		res := queuedBehind(t, b, kv, []func() txnResult{
			putCall(ctx, b, "/conflict/first", "1", 0),
			putCall(ctx, b, "/conflict/a", "a", 0),
			putCall(ctx, b, "/conflict/stale", "x", 12345), // a revision it never had
			putCall(ctx, b, "/conflict/b", "b", 0),
		})

		if !res[1].succeeded || !res[3].succeeded || res[2].succeeded || res[2].err != nil {
			t.Fatalf("answers %+v: want every call but the stale one through", res)
		}

		if got := kv.committed(); !slices.Equal(got, []int{1, 3, 1, 1, 1}) {
			t.Fatalf("transactions of %v operations, want the three joined, then each alone", got)
		}

		if value(t, "/conflict/a") != "a" || value(t, "/conflict/b") != "b" || value(t, "/conflict/stale") != "" {
			t.Fatal("the calls' writes are not what each transaction alone would have made")
		}
	})

	t.Run("a joined transaction that fails is made again call by call", func(t *testing.T) {
		b, kv := newGated(MaxBatchOps)
		kv.failJoined.Store(true)

		res := queuedBehind(t, b, kv, []func() txnResult{
			putCall(ctx, b, "/failed/first", "1", 0),
			putCall(ctx, b, "/failed/a", "a", 0),
			putCall(ctx, b, "/failed/b", "b", 0),
		})

		for i, r := range res {
			if r.err != nil || !r.succeeded {
				t.Fatalf("call %d: %+v", i, r)
			}
		}

		if got := kv.committed(); !slices.Equal(got, []int{1, 2, 1, 1}) {
			t.Fatalf("transactions of %v operations, want the two joined, then each alone", got)
		}

		if value(t, "/failed/a") != "a" || value(t, "/failed/b") != "b" {
			t.Fatal("the calls of a joined transaction that failed were not made alone")
		}
	})

	t.Run("calls on one key are never joined, and keep their order", func(t *testing.T) {
		b, kv := newGated(MaxBatchOps)

		one := func(v string) func() txnResult {
			return func() txnResult { return b.txn(ctx, nil, []clientv3.Op{clientv3.OpPut("/same/k", v)}) }
		}

		calls := []func() txnResult{one("0"), one("1"), one("2"), one("3")}

		// Queued one after the other, so that their order is known.
		res := make([]txnResult, len(calls))

		var wg sync.WaitGroup

		wg.Go(func() { res[0] = calls[0]() })
		waitQueued(t, b, 0)

		for i := 1; i < len(calls); i++ {
			wg.Go(func() { res[i] = calls[i]() })
			waitQueued(t, b, i)
		}

		close(kv.open)
		wg.Wait()

		for i, r := range res {
			if r.err != nil || !r.succeeded {
				t.Fatalf("call %d: %+v", i, r)
			}
		}

		if got := kv.committed(); !slices.Equal(got, []int{1, 1, 1, 1}) {
			t.Fatalf("transactions of %v operations, want one each", got)
		}

		if v := value(t, "/same/k"); v != "3" {
			t.Fatalf("/same/k = %q, want the last call's", v)
		}
	})

	t.Run("a transaction holds at most MaxBatchOps", func(t *testing.T) {
		b, kv := newGated(8)

		calls := []func() txnResult{putCall(ctx, b, "/bound/first", "1", 0)}
		for i := range 20 {
			calls = append(calls, putCall(ctx, b, fmt.Sprintf("/bound/%d", i), "v", 0))
		}

		for i, r := range queuedBehind(t, b, kv, calls) {
			if r.err != nil || !r.succeeded {
				t.Fatalf("call %d: %+v", i, r)
			}
		}

		if got := kv.committed(); !slices.Equal(got, []int{1, 8, 8, 4}) {
			t.Fatalf("transactions of %v operations, want batches of 8 at most", got)
		}
	})

	t.Run("batches go on while one is under way, but not on its keys", func(t *testing.T) {
		kv := &gatedKV{KV: cli, open: make(chan struct{})}
		b := newBatcher(kv, 5*time.Second, MaxBatchOps, 2)

		first := make(chan txnResult, 1)
		go func() { first <- putCall(ctx, b, "/flight/a", "1", 0)() }()
		waitQueued(t, b, 0) // taken, and held at the gate

		// Another key goes through while the first is held.
		if r := putCall(ctx, b, "/flight/b", "1", 0)(); r.err != nil || !r.succeeded {
			t.Fatalf("a call on another key: %+v", r)
		}

		// The first's key waits for it, then sees what it wrote.
		same := make(chan txnResult, 1)
		go func() {
			same <- b.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.Value("/flight/a"), "=", "1")}, []clientv3.Op{clientv3.OpPut("/flight/a", "2")})
		}()
		waitQueued(t, b, 1)

		select {
		case r := <-same:
			t.Fatalf("a call on the key of a batch under way was made meanwhile: %+v", r)
		case <-time.After(100 * time.Millisecond):
		}

		close(kv.open)

		if r := <-first; r.err != nil || !r.succeeded {
			t.Fatalf("the first call: %+v", r)
		}

		if r := <-same; r.err != nil || !r.succeeded {
			t.Fatalf("the call behind it: %+v, want it made after the first", r)
		}

		if v := value(t, "/flight/a"); v != "2" {
			t.Fatalf("/flight/a = %q", v)
		}
	})

	t.Run("a call that gave up is not made", func(t *testing.T) {
		b, kv := newGated(MaxBatchOps)

		gone, cancel := context.WithCancel(ctx)
		calls := []func() txnResult{putCall(ctx, b, "/gone/first", "1", 0), putCall(gone, b, "/gone/k", "v", 0)}

		var wg sync.WaitGroup

		wg.Go(func() { _ = calls[0]() })
		waitQueued(t, b, 0)

		second := make(chan txnResult, 1)

		wg.Go(func() { second <- calls[1]() })
		waitQueued(t, b, 1)

		cancel()

		if res := <-second; res.err == nil { // at once: the first still waits
			t.Fatalf("a call whose context ended answered %+v", res)
		}

		close(kv.open)
		wg.Wait()

		// The batcher is idle once it has answered what it held.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			b.mu.Lock()
			idle := b.running == 0
			b.mu.Unlock()

			if idle {
				break
			}

			if time.Now().After(deadline) {
				t.Fatal("the batcher did not go idle")
			}
		}

		if v := value(t, "/gone/k"); v != "" {
			t.Fatalf("/gone/k = %q: a call that gave up before its turn was made", v)
		}
	})
}
