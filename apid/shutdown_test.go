package apid_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid"
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

// A follow must not hold a graceful stop for its whole grace: while apid
// stops, every new call to the node waits (machined holds the listening
// socket for the next apid). Shutdown ends streaming calls after
// StreamStopGrace, Unavailable, so that the client calls again.
func TestShutdownEndsFollowsBeforeTheGrace(t *testing.T) {
	p, nodes := cluster(t, 1)
	c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	stream, err := c.Events(ctx, client.WithTailEvents(0))
	if err != nil {
		t.Fatal(err)
	}

	if err := nodes[0].Backend.WaitEventFollowers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	const grace = time.Minute

	began := time.Now()
	done := make(chan struct{})

	go func() {
		nodes[0].Shutdown(grace)
		close(done)
	}()

	select {
	case <-done:
	case <-time.After(grace / 2):
		t.Fatalf("Shutdown with a follow open still running after %s, want it over after about %s", grace/2, apid.StreamStopGrace)
	}

	took := time.Since(began)
	if took < apid.StreamStopGrace {
		t.Errorf("Shutdown ended a follow after %s, before StreamStopGrace (%s)", took, apid.StreamStopGrace)
	}

	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("the follow's end: %v, want Unavailable saying the API is stopping", err)
	}

	t.Logf("Shutdown with a follow open took %s; the follow ended with %v", took.Round(time.Millisecond), err)
}
