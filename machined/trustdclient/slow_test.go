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

// TestBusyEndpointKeepsItsNodes: a heartbeat that the preferred endpoint,
// up and connected, answers too late or refuses as unavailable for now is
// not sent on to the other: Call returns its error and the node stays,
// until the endpoint has been so for SlowFor; then the call moves on.
func TestBusyEndpointKeepsItsNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		code codes.Code
		busy func(*fakeTrustd)
	}{
		{"late", codes.DeadlineExceeded, func(f *fakeTrustd) { f.hold, f.held = make(chan struct{}), make(chan struct{}, 16) }},
		{"refused", codes.Unavailable, func(f *fakeTrustd) { f.refuse.Store(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			authority := testCA(t)
			busy, other := startTrustd(t, authority), startTrustd(t, authority)
			clk := clock.NewFake(time.Now())

			client := preferring(t, busy.addr, trustdclient.Config{
				Endpoints: []string{busy.addr, other.addr}, Certificate: newNodeCert(t, authority).get,
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

			if ep, err := beat(); err != nil || ep != busy.addr {
				t.Fatalf("the first heartbeat answered by %q (%v), want %s", ep, err, busy.addr)
			}

			tc.busy(busy)

			for i, wait := range []time.Duration{0, trustdclient.SlowFor / 2} {
				clk.Advance(wait)

				ep, err := beat()
				if status.Code(err) != tc.code || ep != "" {
					t.Fatalf("heartbeat %d: answered by %q (%v), want the %s of the busy endpoint", i+1, ep, err, tc.code)
				}

				if dials, _ := other.seen(); dials != 0 {
					t.Fatalf("heartbeat %d went on to the other endpoint (%d connections)", i+1, dials)
				}
			}

			clk.Advance(trustdclient.SlowFor / 2)

			if ep, err := beat(); err != nil || ep != other.addr {
				t.Fatalf("a heartbeat after %s of busy ones answered by %q (%v), want %s", trustdclient.SlowFor, ep, err, other.addr)
			}

			if busy.hold != nil {
				close(busy.hold)
			}
		})
	}
}

// TestGoneEndpointMovesAtOnce: a heartbeat whose control plane stops
// under it (its connection closed, no status sent) goes on to the other
// endpoint at once: only a control plane that answers keeps its nodes.
func TestGoneEndpointMovesAtOnce(t *testing.T) {
	ctx := testContext(t)
	authority := testCA(t)
	gone, other := startTrustd(t, authority), startTrustd(t, authority)

	client := preferring(t, gone.addr, trustdclient.Config{
		Endpoints: []string{gone.addr, other.addr}, Certificate: newNodeCert(t, authority).get,
		AcceptedCAs: func() *x509.CertPool { p := x509.NewCertPool(); p.AddCert(authority.Cert); return p },
		Source:      "127.0.0.1",
	})

	beat := func() (string, error) {
		return client.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()

			_, err := membership.NewMembershipServiceClient(conn).Heartbeat(ctx, &membership.HeartbeatRequest{})

			return err
		})
	}

	if ep, err := beat(); err != nil || ep != gone.addr {
		t.Fatalf("the first heartbeat answered by %q (%v), want %s", ep, err, gone.addr)
	}

	gone.hold, gone.held = make(chan struct{}), make(chan struct{}, 1)

	go func() {
		<-gone.held
		gone.srv.Stop()
	}()

	if ep, err := beat(); err != nil || ep != other.addr {
		t.Fatalf("a heartbeat whose control plane stopped under it answered by %q (%v), want %s at once", ep, err, other.addr)
	}
}
