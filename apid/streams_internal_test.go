package apid

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/wire"
)

// guardTest is a stream guard on a fake clock, with apid's own re-check
// against a replaceable accepted set.
type guardTest struct {
	clk       *clock.Fake
	g         *streamGuard
	authority *ca.CA
	iss       *ca.Issuer
	accepted  atomic.Pointer[ca.AcceptedSet]
}

func newGuardTest(t *testing.T) *guardTest {
	t.Helper()

	now := time.Now().Truncate(time.Second)
	gt := &guardTest{clk: clock.NewFake(now), authority: catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))}
	gt.iss = catest.NewIssuer(t, gt.authority, now)

	set, err := ca.NewAcceptedSet(now, gt.authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	gt.accepted.Store(set)

	s := &Server{accepted: gt.accepted.Load, clock: gt.clk}
	gt.g = newStreamGuard(gt.clk, s.recheckClient, slog.New(slog.DiscardHandler))
	t.Cleanup(gt.g.stop)

	return gt
}

// chain issues a client certificate of ttl and returns its verified chain.
func (gt *guardTest) chain(t *testing.T, ttl time.Duration) []*x509.Certificate {
	t.Helper()

	leaf := catest.Issue(t, gt.iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, ttl, role.Reader).Cert

	return []*x509.Certificate{leaf, gt.authority.Cert}
}

// node issues another node's impersonator certificate.
func (gt *guardTest) node(t *testing.T) []*x509.Certificate {
	t.Helper()

	leaf := catest.Issue(t, gt.iss, catest.Key(t, ca.Ed25519), ca.ProfileImpersonator, 0).Cert

	return []*x509.Certificate{leaf, gt.authority.Cert}
}

// call is the context of a call on connection conn (a client port) by
// chain. A call forwarded by another node passes its caller's roles, and
// the real injector decides that it is one.
func call(t *testing.T, chain []*x509.Certificate, conn int, forwarded bool) context.Context {
	t.Helper()

	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:      &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: conn},
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 50000},
	})
	ctx = authz.ContextWithPeerChain(ctx, chain)

	if !forwarded {
		return ctx
	}

	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(wire.MetadataRole, string(role.Reader)))
	inject := authz.NewInjector(authz.InjectorConfig{}).UnaryServerInterceptor()

	_, err := inject(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/m"}, func(c context.Context, _ any) (any, error) {
		ctx = c

		return nil, nil
	})
	if err != nil || !authz.Impersonated(ctx) {
		t.Fatalf("forwarded call: %v", err)
	}

	return ctx
}

func TestStreamCaps(t *testing.T) {
	tests := []struct {
		name string
		// open fills the guard up to a cap; refused is then refused. a is
		// a client's chain, b another node's.
		open    func(gt *guardTest, a, b []*x509.Certificate) []context.Context
		refused func(a, b []*x509.Certificate) context.Context
		limit   int
		want    string
	}{
		{
			name: "per connection",
			open: func(_ *guardTest, a, _ []*x509.Certificate) []context.Context {
				return repeat(call(t, a, 1, false), MaxStreamsPerConnection)
			},
			refused: func(a, _ []*x509.Certificate) context.Context { return call(t, a, 1, false) },
			limit:   MaxStreamsPerConnection, want: "on this connection",
		},
		{
			name: "per identity, over several connections",
			open: func(_ *guardTest, a, _ []*x509.Certificate) []context.Context {
				return append(repeat(call(t, a, 1, false), MaxStreamsPerConnection), repeat(call(t, a, 2, false), MaxStreamsPerIdentity-MaxStreamsPerConnection)...)
			},
			refused: func(a, _ []*x509.Certificate) context.Context { return call(t, a, 3, false) },
			limit:   MaxStreamsPerIdentity, want: "for this client certificate's key",
		},
		{
			name: "per peer node",
			open: func(_ *guardTest, _, b []*x509.Certificate) []context.Context {
				return repeat(call(t, b, 1, true), MaxStreamsPerPeerNode)
			},
			refused: func(_, b []*x509.Certificate) context.Context { return call(t, b, 2, true) },
			limit:   MaxStreamsPerPeerNode, want: "for this client certificate's key",
		},
		{
			name: "per node",
			open: func(gt *guardTest, _, _ []*x509.Certificate) []context.Context {
				var out []context.Context
				for i := range MaxStreams / MaxStreamsPerConnection {
					out = append(out, repeat(call(t, gt.chain(t, time.Hour), 10+i, false), MaxStreamsPerConnection)...)
				}

				return out
			},
			refused: func(a, _ []*x509.Certificate) context.Context { return call(t, a, 99, false) },
			limit:   MaxStreams, want: "on this node",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gt := newGuardTest(t)
			// b is another node's: its calls are forwarded ones.
			a, b := gt.chain(t, time.Hour), gt.node(t)

			var releases []func()

			for i, ctx := range tt.open(gt, a, b) {
				_, release, err := gt.g.admit(ctx, machine.MachineService_Events_FullMethodName, 1)
				if err != nil {
					t.Fatalf("stream %d refused: %v", i, err)
				}

				releases = append(releases, release)
			}

			_, _, err := gt.g.admit(tt.refused(a, b), machine.MachineService_Events_FullMethodName, 1)
			st := (&Server{}).toStatus("", err)

			if status.Code(st) != codes.ResourceExhausted || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "limit "+strconv.Itoa(tt.limit)) {
				t.Fatalf("over the cap: %v, want ResourceExhausted %q naming limit %d", st, tt.want, tt.limit)
			}

			// Another client on another connection still gets in below
			// the node's cap.
			if tt.limit < MaxStreams {
				if _, release, err := gt.g.admit(call(t, gt.chain(t, time.Hour), 77, false), "/m", 1); err != nil {
					t.Fatalf("another client refused: %v", err)
				} else {
					release()
				}
			}

			for _, r := range releases {
				r()
			}

			if gt.g.total != 0 || len(gt.g.perConn) != 0 || len(gt.g.perID) != 0 || len(gt.g.open) != 0 {
				t.Fatalf("after release: total %d, %d connections, %d identities, %d open", gt.g.total, len(gt.g.perConn), len(gt.g.perID), len(gt.g.open))
			}

			if _, release, err := gt.g.admit(tt.refused(a, b), "/m", 1); err != nil {
				t.Fatalf("after release: %v", err)
			} else {
				release()
			}
		})
	}
}

// TestFanOutCountsEveryNode: a fan-out to MaxFanOut nodes fits one
// client's cap and takes all of it; on its connection it is one stream.
func TestFanOutCountsEveryNode(t *testing.T) {
	gt := newGuardTest(t)
	a := gt.chain(t, time.Hour)

	_, release, err := gt.g.admit(call(t, a, 1, false), "/m", MaxFanOut)
	if err != nil {
		t.Fatalf("a fan-out to MaxFanOut nodes: %v", err)
	}
	defer release()

	if gt.g.perConn[connKey(call(t, a, 1, false))] != 1 {
		t.Fatalf("the fan-out counts %d on its connection, want 1", gt.g.perConn[connKey(call(t, a, 1, false))])
	}

	_, _, err = gt.g.admit(call(t, a, 2, false), "/m", 1)
	if !errors.Is(err, errTooManyStreams) || !strings.Contains(err.Error(), "key") {
		t.Fatalf("one more by the same client: %v", err)
	}
}

func repeat(ctx context.Context, n int) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = ctx
	}

	return out
}

// TestUnaryCallsHaveHeadroom: a node full of follows still serves unary
// calls, UnaryHeadroom of them at once.
func TestUnaryCallsHaveHeadroom(t *testing.T) {
	const version = machine.MachineService_Version_FullMethodName

	gt := newGuardTest(t)

	for i := range MaxStreams / MaxStreamsPerConnection {
		chain := gt.chain(t, time.Hour)

		for range MaxStreamsPerConnection {
			if _, _, err := gt.g.admit(call(t, chain, i, false), machine.MachineService_Events_FullMethodName, 1); err != nil {
				t.Fatal(err)
			}
		}
	}

	if _, _, err := gt.g.admit(call(t, gt.chain(t, time.Hour), 99, false), machine.MachineService_Logs_FullMethodName, 1); !errors.Is(err, errTooManyStreams) {
		t.Fatalf("a follow on a full node: %v", err)
	}

	chain := gt.chain(t, time.Hour)
	for i := range UnaryHeadroom {
		if _, _, err := gt.g.admit(call(t, chain, 100+i/MaxStreamsPerConnection, false), version, 1); err != nil {
			t.Fatalf("Version %d on a node full of follows: %v", i, err)
		}
	}

	_, _, err := gt.g.admit(call(t, gt.chain(t, time.Hour), 101, false), version, 1)
	if !errors.Is(err, errTooManyStreams) || !strings.Contains(err.Error(), "on this node (limit "+strconv.Itoa(MaxStreams+UnaryHeadroom)+")") {
		t.Fatalf("Version past the headroom: %v", err)
	}
}
