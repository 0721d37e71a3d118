package apid

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/aegis-os/aegis/ca"
)

// noStats is a stats handler that does nothing.
type noStats struct{}

func (noStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (noStats) HandleRPC(context.Context, stats.RPCStats)                         {}
func (noStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (noStats) HandleConn(context.Context, stats.ConnStats)                       {}

// connContext is the context apid gives a connection from remote port port.
func connContext(port int) context.Context {
	return connStats{noStats{}}.TagConn(context.Background(), &stats.ConnTagInfo{
		RemoteAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
		LocalAddr:  &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 50000},
	})
}

// TestConnStateWorksFactsOutOnce: a connection's key and its certificate's
// facts are worked out once and read by every call; another chain gets
// its own.
func TestConnStateWorksFactsOutOnce(t *testing.T) {
	gt := newGuardTest(t)
	conn := connContext(40001)
	chain, other := gt.chain(t, time.Hour), gt.chain(t, time.Hour)

	if key := connKey(conn); key != "127.0.0.1:40001|127.0.0.2:50000" {
		t.Fatalf("connection key %q", key)
	}

	first := peerOf(conn, chain)
	if first.id != identityOf(chain[0]) || first.serial != chain[0].SerialNumber.Text(16) || !first.notAfter.Equal(chainNotAfter(chain)) {
		t.Fatalf("facts %+v", first)
	}

	if peerOf(conn, chain) != first {
		t.Fatal("a second call worked the facts out again")
	}

	if p := peerOf(conn, other); p == first || p.id != identityOf(other[0]) {
		t.Fatal("another certificate got the first one's facts")
	}
}

// TestRecheckCallOnOpenConnection: on a connection whose first call passed,
// the next call is refused as soon as the certificate is revoked, its CA is
// no longer accepted or it has expired: what can change is checked at
// every call, whatever the connection remembers.
func TestRecheckCallOnOpenConnection(t *testing.T) {
	gt := newGuardTest(t)
	revoked := &Revocations{}
	s := &Server{accepted: gt.accepted.Load, clock: gt.clk, revoked: revoked}
	conn := connContext(40002)
	chain := gt.chain(t, time.Hour)

	if err := s.recheckCall(conn, chain); err != nil {
		t.Fatalf("first call: %v", err)
	}

	revoked.Set([]string{chain[0].SerialNumber.Text(16)})

	if err := s.recheckCall(conn, chain); !errors.Is(err, errRevoked) {
		t.Fatalf("after the revocation: %v, want errRevoked", err)
	}

	revoked.Set(nil)

	if err := s.recheckCall(conn, chain); err != nil {
		t.Fatalf("after the revocation was withdrawn: %v", err)
	}

	other := newGuardTest(t)
	gt.accepted.Store(other.accepted.Load())

	if err := s.recheckCall(conn, chain); !errors.Is(err, errCANotAccepted) {
		t.Fatalf("after the CA left the accepted set: %v, want errCANotAccepted", err)
	}

	set, err := ca.NewAcceptedSet(gt.clk.Now(), gt.authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	gt.accepted.Store(set)
	gt.clk.Advance(2 * time.Hour)

	if err := s.recheckCall(conn, chain); !errors.Is(err, errChainExpired) {
		t.Fatalf("after expiry: %v, want errChainExpired", err)
	}
}
