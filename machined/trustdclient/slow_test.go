package trustdclient_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/trustdclient"
)

// TestSlowEndpointKeepsItsNodes: a heartbeat that the preferred endpoint,
// up and connected, answers too late is not sent on to the other: Call
// returns its error and the node stays, until the endpoint has been slow
// for SlowFor; then the call moves on.
func TestSlowEndpointKeepsItsNodes(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	slow, other := startTrustd(t, authority), startTrustd(t, authority)
	clk := clock.NewFake(time.Now())

	client := preferring(t, slow.addr, trustdclient.Config{
		Endpoints: []string{slow.addr, other.addr}, Certificate: newNodeCert(t, authority).get,
		AcceptedCAs: func() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(authority.Cert); return p },
		Source:      "127.0.0.1", Clock: clk,
	})

	// A heartbeat with a deadline of its own, as membership.Sender's.
	beat := func() (string, error) {
		return client.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()

			_, err := membership.NewMembershipServiceClient(conn).Heartbeat(ctx, &membership.HeartbeatRequest{})

			return err
		})
	}

	if ep, err := beat(); err != nil || ep != slow.addr {
		t.Fatalf("the first heartbeat answered by %q (%v), want %s", ep, err, slow.addr)
	}

	slow.hold, slow.held = make(chan struct{}), make(chan struct{}, 16)

	for i, wait := range []time.Duration{0, trustdclient.SlowFor / 2} {
		clk.Advance(wait)

		ep, err := beat()
		if status.Code(err) != codes.DeadlineExceeded || ep != "" {
			t.Fatalf("late heartbeat %d: answered by %q (%v), want the deadline's error", i+1, ep, err)
		}

		if dials, _ := other.seen(); dials != 0 {
			t.Fatalf("late heartbeat %d went on to the other endpoint (%d connections)", i+1, dials)
		}
	}

	clk.Advance(trustdclient.SlowFor / 2)

	if ep, err := beat(); err != nil || ep != other.addr {
		t.Fatalf("a heartbeat after %s of late ones answered by %q (%v), want %s", trustdclient.SlowFor, ep, err, other.addr)
	}

	close(slow.hold)
}
