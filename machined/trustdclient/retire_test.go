package trustdclient

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/aegis-os/aegis/internal/clock"
)

// keptEndpoints is the endpoints the client keeps a connection to.
func keptEndpoints(c *Client) []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	var eps []string
	for ep := range c.conns {
		eps = append(eps, ep)
	}

	slices.Sort(eps)

	return eps
}

// untilShutdown waits until conn is closed, then fails as a stream cut by
// its connection does.
func untilShutdown(ctx context.Context, conn *grpc.ClientConn) error {
	for s := conn.GetState(); s != connectivity.Shutdown; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}

	return errors.New("rpc error: code = Canceled desc = grpc: the client connection is closing")
}

// TestOneConnectionKept: a node keeps a connection only to the endpoint
// that answered last. After a failover, the connection to the control
// plane that failed is closed; once the node is back on it, the one to the
// control plane it moved to is closed when its last call ends, and a
// stream held open there (the revocation watch) is cut at RetireGrace and
// runs again on the connection kept, without counting as a failure of
// either endpoint.
func TestOneConnectionKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	c, fake := fakeClient(t, clk, "10.5.0.2:50001", "10.5.0.3:50001")
	preferred := c.Preferred()
	other := "10.5.0.2:50001"

	if other == preferred {
		other = "10.5.0.3:50001"
	}

	if _, err := c.Call(ctx, fake.call); err != nil {
		t.Fatal(err)
	}

	// The preferred fails: the call moves on, and its connection goes.
	fake.setDown(preferred, true)

	if got, err := c.Call(ctx, fake.call); err != nil || got != other {
		t.Fatalf("Call with %s down: %q, %v", preferred, got, err)
	}

	if kept := keptEndpoints(c); !slices.Equal(kept, []string{other}) {
		t.Fatalf("after the failover the client keeps connections to %v, want only %s", kept, other)
	}

	// A watch held open on the other: cut once the node is back on its
	// own, then run there.
	var watchedOn []string

	watch, held := make(chan error, 1), make(chan struct{})

	go func() {
		_, err := c.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			cc := conn.(*grpc.ClientConn)
			watchedOn = append(watchedOn, cc.Target())

			if cc.Target() == preferred {
				return nil
			}

			close(held)

			return untilShutdown(ctx, cc)
		})
		watch <- err
	}()

	<-held
	fake.setDown(preferred, false)
	clk.Advance(ProbeInterval / 2)
	fake.reset()

	if got, err := c.Call(ctx, fake.call); err != nil || got != preferred {
		t.Fatalf("Call once %s is back: %q, %v", preferred, got, err)
	}

	if kept := keptEndpoints(c); !slices.Equal(kept, []string{preferred}) {
		t.Fatalf("back on %s, the client keeps connections to %v", preferred, kept)
	}

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("no RetireGrace timer for the connection under the watch: %v", err)
	}

	select {
	case err := <-watch:
		t.Fatalf("the watch ended before RetireGrace: %v", err)
	default:
	}

	clk.Advance(RetireGrace)

	if err := <-watch; err != nil {
		t.Fatalf("the watch cut at RetireGrace: %v", err)
	}

	if !slices.Equal(watchedOn, []string{other, preferred}) {
		t.Fatalf("the watch ran on %v, want %s then %s", watchedOn, other, preferred)
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	for i, at := range c.retryAt {
		if !at.IsZero() {
			t.Errorf("endpoint %s counted as failed by the cut", c.cfg.Endpoints[i])
		}
	}
}
