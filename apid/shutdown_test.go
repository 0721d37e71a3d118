package apid_test

import (
	"context"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
)

// Events follows never end by themselves; Shutdown must end them once its
// grace period is over instead of waiting forever.
func TestShutdownEndsFollows(t *testing.T) {
	p, nodes := cluster(t, 2)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	stream, err := c.Events(client.WithNodes(ctx, nodes[0].IP, nodes[1].IP), client.WithTailEvents(0))
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range nodes {
		if err := n.Backend.WaitEventFollowers(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}

	done := make(chan struct{})

	go func() {
		nodes[0].Shutdown(100 * time.Millisecond)
		close(done)
	}()

	select {
	case <-done:
	case <-time.After(callTimeout):
		t.Fatal("Shutdown did not end an open follow")
	}

	if _, err := stream.Recv(); err == nil {
		t.Fatal("the follow survived the shutdown")
	}
}
