package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestEtcdMemberAskedAgain: a query of the local member's ID that fails
// while etcd runs (etcd only just listening) is asked again after
// etcdMemberRetry, until it answers; once etcd stops, nothing is retried.
func TestEtcdMemberAskedAgain(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := &Node{deps: deps{clock: clk, log: slog.New(slog.DiscardHandler)}}

	calls := make(chan bool, 10)
	answers := []bool{false, false, true} // fails twice, then etcd answers

	set := func(_ context.Context, running bool) bool {
		calls <- running
		if !running {
			return true
		}

		ok := answers[0]
		answers = answers[1:]

		return ok
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	running := make(chan bool, 1)
	done := make(chan struct{})

	go func() {
		defer close(done)
		n.followEtcd(ctx, running, set)
	}()

	running <- true

	for i := range 3 {
		if got := waitCall(t, calls); !got {
			t.Fatalf("call %d: running = false", i)
		}

		if i < 2 {
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := clk.WaitForTimers(wctx, 1)

			wcancel()

			if err != nil {
				t.Fatalf("after failed query %d, no retry was set: %v", i+1, err)
			}

			clk.Advance(etcdMemberRetry)
		}
	}

	// Answered: no timer is left, and nothing is asked again.
	clk.Advance(10 * etcdMemberRetry)

	select {
	case got := <-calls:
		t.Fatalf("asked again after an answer (running = %v)", got)
	case <-time.After(50 * time.Millisecond):
	}

	running <- false

	if got := waitCall(t, calls); got {
		t.Fatal("etcd stopped, but the member was asked for")
	}

	cancel()
	<-done
}

func waitCall(t *testing.T, calls <-chan bool) bool {
	t.Helper()

	select {
	case got := <-calls:
		return got
	case <-time.After(5 * time.Second):
		t.Fatal("the member was not asked for")

		return false
	}
}
