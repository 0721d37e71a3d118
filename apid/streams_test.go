package apid_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logtest"
)

// follow opens an Events follow and waits for its first event (the last
// one the backend holds), the sign that apid and the backend hold it open.
func follow(ctx context.Context, c *client.Client) (machine.MachineService_EventsClient, error) {
	stream, err := c.MachineClient.Events(ctx, &machine.EventsRequest{TailEvents: 1})
	if err != nil {
		return nil, err
	}

	_, err = stream.Recv()

	return stream, err
}

// TestStreamCapsOverTheWire: a reader fills its connection, then what its
// key may hold over a second one, and is refused ResourceExhausted naming
// the cap each time; another client is still served.
func TestStreamCapsOverTheWire(t *testing.T) {
	p, nodes := cluster(t, 1)
	reader := p.Client(t, role.Reader)
	ctx := testCtx(t)

	for _, step := range []struct {
		open int
		want string
	}{
		{apid.MaxStreamsPerConnection, "on this connection"},
		{apid.MaxStreamsPerIdentity - apid.MaxStreamsPerConnection, "for this client certificate's key"},
	} {
		c := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, reader))

		for i := range step.open {
			if _, err := follow(ctx, c); err != nil {
				t.Fatalf("follow %d: %v", i, err)
			}
		}

		_, err := follow(ctx, c)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), step.want) {
			t.Fatalf("one follow over the cap: %v, want ResourceExhausted %q", err, step.want)
		}

		if _, err := c.Version(ctx); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Version over the cap: %v, want ResourceExhausted", err)
		}
	}

	other := apidtest.TalosClient(t, nodes[0].Addr, p.ClientTLS(t, p.Client(t, role.Reader)))
	if _, err := follow(ctx, other); err != nil {
		t.Fatalf("another client's follow: %v", err)
	}

	if _, err := other.Version(ctx); err != nil {
		t.Fatalf("another client's Version: %v", err)
	}
}

// TestFollowEndsWithItsCredential: a follow opened with a valid client
// certificate is ended, Unauthenticated and saying why, once the
// certificate expires or its CA is no longer accepted; apid's clock is a
// fake one that the test moves.
func TestFollowEndsWithItsCredential(t *testing.T) {
	tests := []struct {
		name string
		// end makes the credential invalid.
		end  func(clk *clock.Fake, cert *apidtest.Pair, accepted *atomic.Pointer[ca.AcceptedSet])
		want string
	}{
		{
			name: "certificate expired",
			end: func(clk *clock.Fake, cert *apidtest.Pair, _ *atomic.Pointer[ca.AcceptedSet]) {
				clk.Set(cert.Cert.NotAfter.Add(time.Second))
			},
			want: "stream ended: a certificate of the client's chain is not valid now: the client certificate expired at",
		},
		{
			name: "CA removed",
			end: func(clk *clock.Fake, _ *apidtest.Pair, accepted *atomic.Pointer[ca.AcceptedSet]) {
				other := catest.NewCA(t, ca.Ed25519, clk.Now().Add(-time.Hour))

				set, err := ca.NewAcceptedSet(clk.Now(), other.Cert)
				if err != nil {
					t.Fatal(err)
				}

				accepted.Store(set)
				clk.Advance(apid.StreamRecheckInterval + time.Second)
			},
			want: "stream ended: the client certificate's CA is no longer accepted",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				sink     logtest.Sink
				accepted atomic.Pointer[ca.AcceptedSet]
			)

			p := apidtest.NewPKI(t)
			clk := clock.NewFake(time.Now())
			accepted.Store(p.Accepted(t))

			node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Clock: clk, AcceptedCAs: accepted.Load, Logger: sink.Logger()})
			cert := p.Client(t, role.Reader)
			c := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, cert))

			stream, err := follow(testCtx(t), c)
			if err != nil {
				t.Fatal(err)
			}

			if err := clk.WaitForTimers(testCtx(t), 1); err != nil {
				t.Fatal(err)
			}

			tt.end(clk, &cert, &accepted)

			// Other timers of the node (a connection's first-call timer)
			// may be what WaitForTimers saw: until the stream ends, time
			// goes on by a recheck interval at a time, so that the stream's
			// recheck fires whenever its timer was made.
			ended := make(chan struct{})
			defer close(ended)

			go func() {
				for {
					select {
					case <-ended:
						return
					case <-time.After(50 * time.Millisecond):
						clk.Advance(apid.StreamRecheckInterval)
					}
				}
			}()

			_, err = stream.Recv()
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Fatalf("follow after the credential ended: %v, want Unauthenticated %q", err, tt.want)
			}

			if len(sink.Find(t, "stream ended: credential no longer valid")) != 1 {
				t.Fatalf("the end is not logged once: %v", sink.Records(t))
			}
		})
	}
}
