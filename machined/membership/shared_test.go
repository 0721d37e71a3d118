package membership_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/membership"
)

// gatedKV holds every read of the whole member list (its first page) until
// open is closed, or its context ends, and counts them.
type gatedKV struct {
	clientv3.KV
	open  chan struct{}
	scans atomic.Int64
}

func (g *gatedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	op := clientv3.OpGet(key, opts...)

	if key == "/aegis/members/" && !op.IsCountOnly() && len(op.RangeBytes()) > 0 {
		g.scans.Add(1)

		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	return g.KV.Get(ctx, key, opts...)
}

// TestSharedReadOutlivesItsCaller: the read of every entry that a new
// node's first heartbeat needs (the check of a name without its key) is
// not ended by that heartbeat giving up; the next new node's heartbeat is
// served by the same read, and no other is made. Read with the context of
// the call that found it due, a read longer than a heartbeat's deadline
// was begun again by every call, and none was ever kept.
func TestSharedReadOutlivesItsCaller(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	kv := &gatedKV{KV: cli.KV, open: make(chan struct{})}
	cli.KV = kv
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

	s, err := membership.New(membership.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = s.Put(ctx, entry("worker-1", "10.0.0.1"), membership.RoleWorker)

	cancel()

	if !errors.Is(err, membership.ErrUnavailable) || !strings.Contains(err.Error(), "waiting for a read of every entry: "+context.DeadlineExceeded.Error()) {
		t.Fatalf("a heartbeat that gave up on the read: %v, want ErrUnavailable naming the read and its deadline", err)
	}

	done := make(chan error, 1)

	go func() { done <- s.Put(context.Background(), entry("worker-2", "10.0.0.2"), membership.RoleWorker) }()

	close(kv.open)

	if err := <-done; err != nil {
		t.Fatalf("the next new node's heartbeat: %v", err)
	}

	if n := kv.scans.Load(); n != 1 {
		t.Fatalf("the list was read %d times for two new nodes within NamesFresh, want once", n)
	}

	// Past NamesFresh, the next new node's check reads the list again.
	clk.Advance(membership.NamesFresh)

	if err := s.Put(context.Background(), entry("worker-3", "10.0.0.3"), membership.RoleWorker); err != nil {
		t.Fatal(err)
	}

	if n := kv.scans.Load(); n != 2 {
		t.Fatalf("the list was read %d times, want twice (once per NamesFresh)", n)
	}
}
