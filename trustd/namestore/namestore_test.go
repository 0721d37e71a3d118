package namestore_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func binding(name, source string, notAfter time.Time) trustd.Binding {
	return trustd.Binding{Name: name, Source: addr(source), Addresses: []netip.Addr{addr(source)}, NotAfter: notAfter}
}

// TestNameRecord runs the record on a real etcd: control planes' names
// from etcd's members and their member entries; a bound name refused to
// other addresses until its certificate ends, kept by its holder; a live
// worker's entry holding its name; of concurrent bindings of one name,
// exactly one winning.
func TestNameRecord(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Now())
	ctx := context.Background()

	s, err := namestore.New(namestore.Config{Client: cli, Clock: clk, Members: func(context.Context) ([]namestore.Entry, error) {
		return []namestore.Entry{
			{Name: "CP-2", Addresses: []netip.Addr{addr("10.0.0.2")}, ControlPlane: true},
			{Name: "worker-9", Addresses: []netip.Addr{addr("10.0.0.9")}},
		}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("control planes' names", func(t *testing.T) {
		got, err := s.ControlPlaneNames(ctx)
		if err != nil || !slices.Equal(got, []string{e.Config().Name, "cp-2"}) {
			t.Fatalf("ControlPlaneNames = %v, %v", got, err)
		}
	})

	until := clk.Now().Add(time.Hour)

	t.Run("bound name", func(t *testing.T) {
		if err := s.Bind(ctx, binding("worker-1", "10.0.0.5", until)); err != nil {
			t.Fatal(err)
		}

		err := s.Check(ctx, "worker-1", addr("10.0.0.6"))
		if !errors.Is(err, trustd.ErrNameHeld) || !strings.Contains(err.Error(), "worker-1 is bound to the node at [10.0.0.5] until") {
			t.Fatalf("another address: %v, want ErrNameHeld naming the holder", err)
		}

		if err := s.Bind(ctx, binding("worker-1", "10.0.0.6", until)); !errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("binding from another address: %v, want ErrNameHeld", err)
		}

		// The holder renews: the name is kept, and its binding extended.
		if err := s.Check(ctx, "worker-1", addr("10.0.0.5")); err != nil {
			t.Fatal(err)
		}

		clk.Advance(30 * time.Minute)

		if err := s.Bind(ctx, binding("worker-1", "10.0.0.5", clk.Now().Add(time.Hour))); err != nil {
			t.Fatal(err)
		}

		clk.Advance(45 * time.Minute) // past the first certificate's end

		if err := s.Check(ctx, "worker-1", addr("10.0.0.6")); !errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("after the renewal: %v, want still held", err)
		}

		clk.Advance(16 * time.Minute) // past the renewed one's

		if err := s.Bind(ctx, binding("worker-1", "10.0.0.6", clk.Now().Add(time.Hour))); err != nil {
			t.Fatalf("once the holder's certificate ended: %v", err)
		}
	})

	t.Run("a name proven again", func(t *testing.T) {
		b := binding("worker-2", "10.0.0.12", clk.Now().Add(time.Hour))
		if err := s.Ensure(ctx, b); err != nil {
			t.Fatal(err)
		}

		rev := func() int64 {
			resp, err := cli.Get(ctx, namestore.DefaultPrefix+"worker-2")
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the binding in etcd: %v, %v", resp, err)
			}

			return resp.Kvs[0].ModRevision
		}

		before := rev()
		if err := s.Ensure(ctx, b); err != nil || rev() != before {
			t.Fatalf("a binding already known written again: %v", err)
		}

		if err := s.Ensure(ctx, binding("worker-2", "10.0.0.13", clk.Now().Add(time.Hour))); !errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("another address proving the name: %v, want ErrNameHeld", err)
		}
	})

	t.Run("a live member's name", func(t *testing.T) {
		if err := s.Check(ctx, "worker-9", addr("10.0.0.7")); !errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("another address: %v, want ErrNameHeld", err)
		}

		if err := s.Check(ctx, "worker-9", addr("10.0.0.9")); err != nil {
			t.Fatalf("the member itself: %v", err)
		}
	})

	t.Run("a name released as its node leaves", func(t *testing.T) {
		until := clk.Now().Add(time.Hour)
		if err := s.Bind(ctx, binding("worker-3", "10.0.0.30", until)); err != nil {
			t.Fatal(err)
		}

		// Another node leaving cannot free it.
		if err := s.Release(ctx, "worker-3", []netip.Addr{addr("10.0.0.31")}); err != nil {
			t.Fatal(err)
		}

		if err := s.Check(ctx, "worker-3", addr("10.0.0.31")); !errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("after a release by another node: %v, want still held", err)
		}

		if err := s.Release(ctx, "worker-3", []netip.Addr{addr("10.0.0.30"), addr("10.0.1.30")}); err != nil {
			t.Fatal(err)
		}

		if err := s.Bind(ctx, binding("worker-3", "10.0.0.31", until)); err != nil {
			t.Fatalf("the replacement at a new address after the holder left: %v", err)
		}

		if err := s.Release(ctx, "no-such-name", []netip.Addr{addr("10.0.0.30")}); err != nil {
			t.Fatalf("releasing a name never bound: %v", err)
		}
	})

	t.Run("concurrent bindings of one name", func(t *testing.T) {
		const n = 8

		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  int
			errs []error
		)

		for i := range n {
			wg.Go(func() {
				err := s.Bind(ctx, binding("worker-race", netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)}).String(), clk.Now().Add(time.Hour)))

				mu.Lock()
				defer mu.Unlock()

				switch {
				case err == nil:
					won++
				case !errors.Is(err, trustd.ErrNameHeld):
					errs = append(errs, err)
				}
			})
		}

		wg.Wait()

		if won != 1 || len(errs) > 0 {
			t.Fatalf("%d of %d bindings won, other errors %v; want exactly one", won, n, errs)
		}
	})

	t.Run("etcd gone", func(t *testing.T) {
		stop()

		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()

		if err := s.Check(ctx, "worker-1", addr("10.0.0.6")); err == nil || errors.Is(err, trustd.ErrNameHeld) {
			t.Fatalf("Check without etcd: %v, want a failure", err)
		}
	})
}

// TestControlPlaneNamesAnswerWhileRead: once the names are due, the caller
// that reads them again waits for the read, and the others get the names
// as last read at once instead of waiting behind it.
func TestControlPlaneNamesAnswerWhileRead(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(time.Now())
	ctx := context.Background()

	var (
		mu    sync.Mutex
		gate  chan struct{} // when set, a read of the members waits for it
		reads int
	)

	entered := make(chan struct{}, 1)

	s, err := namestore.New(namestore.Config{Client: etcdtest.Client(t, e), Clock: clk, Members: func(ctx context.Context) ([]namestore.Entry, error) {
		mu.Lock()
		reads++
		g := gate
		mu.Unlock()

		if g != nil {
			entered <- struct{}{}
			<-g
		}

		return []namestore.Entry{{Name: "cp-2", ControlPlane: true}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}

	first, err := s.ControlPlaneNames(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Due again; the next read is held.
	clk.Advance(time.Minute)

	release := make(chan struct{})

	mu.Lock()
	gate = release
	mu.Unlock()

	reader := make(chan error, 1)

	go func() {
		_, err := s.ControlPlaneNames(ctx)
		reader <- err
	}()

	<-entered

	other := make(chan []string, 1)

	go func() {
		names, _ := s.ControlPlaneNames(ctx)
		other <- names
	}()

	select {
	case names := <-other:
		if !slices.Equal(names, first) {
			t.Fatalf("while the names were read again, another caller got %v, want %v", names, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("another caller waited behind the read of the names")
	}

	close(release)

	if err := <-reader; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()

	if reads != 2 {
		t.Fatalf("the members were read %d times, want 2", reads)
	}
}

// TestControlPlaneNamesReadOutlivesItsCaller: the first read of the names
// goes on when the caller that began it gives up, and serves the next
// caller without another read.
func TestControlPlaneNamesReadOutlivesItsCaller(t *testing.T) {
	e, _ := etcdtest.Start(t)
	release := make(chan struct{})

	var reads atomic.Int64

	s, err := namestore.New(namestore.Config{Client: etcdtest.Client(t, e), Clock: clock.NewFake(time.Now()), Members: func(ctx context.Context) ([]namestore.Entry, error) {
		reads.Add(1)

		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}

		return []namestore.Entry{{Name: "cp-2", ControlPlane: true}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = s.ControlPlaneNames(ctx)

	cancel()

	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller that gave up on the first read: %v, want its deadline", err)
	}

	close(release)

	names, err := s.ControlPlaneNames(context.Background())
	if err != nil || !slices.Contains(names, "cp-2") {
		t.Fatalf("the next caller: %v, %v; want cp-2 among the names", names, err)
	}

	if n := reads.Load(); n != 1 {
		t.Fatalf("the members were read %d times, want once", n)
	}
}
