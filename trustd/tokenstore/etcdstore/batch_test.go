package etcdstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

// gatedStore is an etcd store whose client records the keys each
// transaction writes, and can hold one transaction until released, so that
// a test knows which changes wait for the next batch.
type gatedStore struct {
	store *etcdstore.Store

	mu     sync.Mutex
	writes [][]string
	hold   chan struct{}
	held   chan struct{}
}

func newGatedStore(t *testing.T, e *embed.Etcd) *gatedStore {
	t.Helper()

	g := &gatedStore{held: make(chan struct{}, 1)}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(g.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() })

	if g.store, err = etcdstore.New(etcdstore.Config{Client: cli}); err != nil {
		t.Fatal(err)
	}

	return g
}

func (g *gatedStore) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if txn, ok := req.(*etcdserverpb.TxnRequest); ok && len(txn.Compare) > 0 {
		var keys []string
		for _, op := range txn.Success {
			if put := op.GetRequestPut(); put != nil {
				keys = append(keys, string(put.Key))
			}
		}

		g.mu.Lock()
		g.writes = append(g.writes, keys)
		hold := g.hold
		g.hold = nil
		g.mu.Unlock()

		if hold != nil {
			g.held <- struct{}{}
			<-hold
		}
	}

	return invoker(ctx, method, req, reply, cc, opts...)
}

// useHeld starts a use of id whose transaction is held until release, and
// returns once it is held: the changes that come next queue behind it.
func (g *gatedStore) useHeld(t *testing.T, ctx context.Context, id string) (wait func() ([]tokenstore.Record, []error), release func()) {
	t.Helper()

	hold := make(chan struct{})

	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()

	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)

	wait = useAll(ctx, g.store, id)
	<-g.held

	return wait, release
}

// written returns the keys written by each transaction since the last call.
func (g *gatedStore) written() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()

	w := g.writes
	g.writes = nil

	return w
}

// waitQueued waits until n changes wait for the next batch.
func (g *gatedStore) waitQueued(t *testing.T, n int) {
	t.Helper()

	for deadline := time.Now().Add(10 * time.Second); g.store.Queued() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes queued, want %d", g.store.Queued(), n)
		}

		time.Sleep(time.Millisecond)
	}
}

func (g *gatedStore) create(t *testing.T, rs ...tokenstore.Record) {
	t.Helper()

	for _, r := range rs {
		if err := g.store.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}

		if _, err := g.store.Get(context.Background(), r.ID); err != nil { // kept
			t.Fatal(err)
		}
	}

	g.written()
}

// useAll runs uses of ids at once, each in its own goroutine, and returns
// their outcomes in the order of ids.
func useAll(ctx context.Context, s *etcdstore.Store, ids ...string) func() ([]tokenstore.Record, []error) {
	recs, errs := make([]tokenstore.Record, len(ids)), make([]error, len(ids))

	var wg sync.WaitGroup

	for i, id := range ids {
		wg.Go(func() { recs[i], errs[i] = s.Use(ctx, id, testutil.Epoch) })
	}

	return func() ([]tokenstore.Record, []error) {
		wg.Wait()

		return recs, errs
	}
}

// TestBatchedUses checks that uses of one token made while a transaction
// is under way share the next transaction, and that each is counted
// exactly once: of 8 uses of a token with 5 left, 5 succeed with the counts
// 1 to 5 and 3 are refused, in 2 transactions (the one held, then one for
// the 7 that queued behind it), where one transaction per use would take 8
// or more.
func TestBatchedUses(t *testing.T) {
	e, _ := etcdtest.Start(t)
	g := newGatedStore(t, e)
	ctx := context.Background()

	g.create(t, storetest.NewRecord(t, "batchd", 0, 5))

	first, release := g.useHeld(t, ctx, "batchd")

	rest := useAll(ctx, g.store, slices.Repeat([]string{"batchd"}, 7)...)
	g.waitQueued(t, 7)
	release()

	recs, errs := first()
	recs2, errs2 := rest()
	recs, errs = append(recs, recs2...), append(errs, errs2...)

	var counts []uint32

	for i, err := range errs {
		switch {
		case err == nil:
			counts = append(counts, recs[i].Uses)
		case !errors.Is(err, tokenstore.ErrUsedUp):
			t.Errorf("use %d: %v, want success or ErrUsedUp", i, err)
		}
	}

	slices.Sort(counts)

	if !slices.Equal(counts, []uint32{1, 2, 3, 4, 5}) {
		t.Errorf("the uses that succeeded saw the counts %v, want 1 to 5 once each", counts)
	}

	if w := g.written(); len(w) != 2 {
		t.Errorf("%d transactions wrote (%v), want 2", len(w), w)
	}

	if r, err := g.store.Get(ctx, "batchd"); err != nil || r.Uses != 5 {
		t.Fatalf("stored uses: %d, %v; want 5", r.Uses, err)
	}
}

// TestBatchSplit checks that a batch whose compare fails for one record,
// changed by another control plane, does not fail the changes of the
// others: the unchanged record is written on its own, and the changed one
// is changed again from the record as it is now.
func TestBatchSplit(t *testing.T) {
	e, _ := etcdtest.Start(t)
	a, b := newGatedStore(t, e), newGatedStore(t, e)
	ctx := context.Background()

	a.create(t, storetest.NewRecord(t, "first1", 0, 10), storetest.NewRecord(t, "keepsm", 0, 10), storetest.NewRecord(t, "change", 0, 10))

	if _, err := b.store.Use(ctx, "change", testutil.Epoch); err != nil { // a's kept record goes stale
		t.Fatal(err)
	}

	first, release := a.useHeld(t, ctx, "first1")

	rest := useAll(ctx, a.store, "keepsm", "change")
	a.waitQueued(t, 2)
	release()

	if _, errs := first(); errs[0] != nil {
		t.Fatal(errs[0])
	}

	recs, errs := rest()
	for i, want := range []uint32{1, 2} {
		if errs[i] != nil || recs[i].Uses != want {
			t.Errorf("use %d: %d uses, %v; want %d", i, recs[i].Uses, errs[i], want)
		}
	}

	w := a.written()
	if !slices.ContainsFunc(w, func(keys []string) bool { return len(keys) == 2 }) {
		t.Errorf("transactions wrote %v, want one that carried both records", w)
	}

	for id, want := range map[string]uint32{"first1": 1, "keepsm": 1, "change": 2} {
		if r, err := b.store.Get(ctx, id); err != nil || r.Uses != want {
			t.Errorf("%s: %d uses stored, %v; want %d", id, r.Uses, err, want)
		}
	}
}

// TestGivenUpNotCounted checks that a use whose caller gave up while it
// waited for its batch is never counted.
func TestGivenUpNotCounted(t *testing.T) {
	e, _ := etcdtest.Start(t)
	g := newGatedStore(t, e)
	ctx := context.Background()

	g.create(t, storetest.NewRecord(t, "gaveup", 0, 10))

	first, release := g.useHeld(t, ctx, "gaveup")

	quit, cancel := context.WithCancel(ctx)
	gone := useAll(quit, g.store, "gaveup")
	g.waitQueued(t, 1)
	cancel()

	if _, errs := gone(); !errors.Is(errs[0], tokenstore.ErrUnavailable) {
		t.Fatalf("use given up: %v, want ErrUnavailable", errs[0])
	}

	release()

	if _, errs := first(); errs[0] != nil {
		t.Fatal(errs[0])
	}

	// Batches run in the order changes came: once this use is counted, the
	// one given up before it was dropped or counted.
	if r, err := g.store.Use(ctx, "gaveup", testutil.Epoch); err != nil || r.Uses != 2 {
		t.Fatalf("the next use: %d uses, %v; want 2 (the use given up not counted)", r.Uses, err)
	}
}

// TestBatchInOrder checks that the changes of one record in a batch apply
// in the order they came: a use queued after a revocation in the same
// batch is refused, the one before it counted.
func TestBatchInOrder(t *testing.T) {
	e, _ := etcdtest.Start(t)
	g := newGatedStore(t, e)
	ctx := context.Background()

	g.create(t, storetest.NewRecord(t, "first1", 0, 10), storetest.NewRecord(t, "revokd", 0, 10))

	first, release := g.useHeld(t, ctx, "first1")

	before := useAll(ctx, g.store, "revokd")
	g.waitQueued(t, 1)

	var revoked sync.WaitGroup

	revoked.Go(func() {
		if _, err := g.store.Revoke(ctx, "revokd", testutil.Epoch); err != nil {
			t.Error(err)
		}
	})
	g.waitQueued(t, 2)

	after := useAll(ctx, g.store, "revokd")
	g.waitQueued(t, 3)
	release()

	first()
	revoked.Wait()

	if recs, errs := before(); errs[0] != nil || recs[0].Uses != 1 {
		t.Errorf("use before the revocation: %d uses, %v; want 1", recs[0].Uses, errs[0])
	}

	if _, errs := after(); !errors.Is(errs[0], tokenstore.ErrRevoked) {
		t.Errorf("use after the revocation: %v, want ErrRevoked", errs[0])
	}

	if w := g.written(); len(w) != 2 {
		t.Errorf("%d transactions wrote (%v), want 2", len(w), w)
	}

	if r, err := g.store.Get(ctx, "revokd"); err != nil || r.Uses != 1 || r.Revoked.IsZero() {
		t.Fatalf("stored: %d uses, revoked %v, %v; want 1 use and revoked", r.Uses, r.Revoked, err)
	}
}

// TestBatchFailsClosed checks that when etcd stops answering, every change
// queued in a batch is refused with ErrUnavailable within the store's
// timeout, none left waiting.
func TestBatchFailsClosed(t *testing.T) {
	e, stop := etcdtest.Start(t)
	g := newGatedStore(t, e)
	ctx := context.Background()

	g.create(t, storetest.NewRecord(t, "first1", 0, 10), storetest.NewRecord(t, "second", 0, 10),
		storetest.NewRecord(t, "third1", 0, 10))

	first, release := g.useHeld(t, ctx, "first1")

	rest := useAll(ctx, g.store, "second", "third1", "second")
	g.waitQueued(t, 3)
	stop()
	release()

	first()

	_, errs := rest()
	for i, err := range errs {
		if !errors.Is(err, tokenstore.ErrUnavailable) {
			t.Errorf("use %d after etcd stopped: %v, want ErrUnavailable", i, err)
		}
	}
}
