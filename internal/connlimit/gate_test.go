package connlimit

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/internal/clock"
)

// gatedListener wraps a listener of conns with a Limiter that lets max
// handshakes be under way at once.
func gatedListener(t *testing.T, max int, clk *clock.Fake) (*Limiter, net.Listener, chan net.Conn) {
	t.Helper()

	l, err := New(Config{
		PerSource: 3, Total: 16, FirstCall: 10 * time.Second, Clock: clk, MaxHandshakes: max,
		ProvenTotal: 16, ProvenPerSource: 4, HandshakeRoom: 4,
	})
	if err != nil {
		t.Fatal(err)
	}

	conns := make(chan net.Conn, 8)
	lis := l.Wrap(fakeListener{conns: conns})
	t.Cleanup(func() { _ = lis.Close() })

	return l, lis, conns
}

// acceptConn is accept's connection, as the Limiter's.
func acceptConn(t *testing.T, lis net.Listener) *conn {
	t.Helper()

	return accept(t, lis).(*conn) //nolint:forcetypeassert // Wrap's listener returns *conn
}

// TestGateBoundsHandshakes: while MaxHandshakes are under way the listener
// accepts no more, the rest left unread in its queue; a handshake that
// ends, fails, makes a call or closes lets the next one in.
func TestGateBoundsHandshakes(t *testing.T) {
	l, lis, conns := gatedListener(t, 2, clock.NewFake(time.Now()))

	raws := []*fakeConn{newFake("10.1.0.1"), newFake("10.1.0.2"), newFake("10.1.0.3"), newFake("10.1.0.4"), newFake("10.1.0.5")}
	for _, r := range raws {
		conns <- r
	}

	first, second := acceptConn(t, lis), acceptConn(t, lis)

	// The accept loop waits at the gate: it took no third connection.
	if n := len(conns); n != 3 {
		t.Fatalf("%d connections left in the accept queue with 2 handshakes under way, want 3", n)
	}

	// A call ends the first one's handshake.
	first.markCalled()

	third := acceptConn(t, lis)
	if n := len(conns); n != 2 {
		t.Fatalf("%d connections left in the accept queue, want 2", n)
	}

	// A handshake that fails ends it too.
	creds := l.Credentials(failingCreds{}, func(tls.ConnectionState) bool { return false })
	if _, _, err := creds.ServerHandshake(second); !errors.Is(err, errHandshake) {
		t.Fatalf("handshake: %v, want %v", err, errHandshake)
	}

	fourth := acceptConn(t, lis)

	// So does a close.
	_ = third.Close()

	if c := acceptConn(t, lis); c.RemoteAddr() != raws[4].remote {
		t.Fatalf("accepted %v, want %v", c.RemoteAddr(), raws[4].remote)
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	if l.gate.held != 2 || fourth.atGate == nil {
		t.Fatalf("%d places held at the gate, want 2 (the fourth and fifth connections)", l.gate.held)
	}
}

// TestGateEvictsStalledStrangers: at a full gate, a stranger's handshake
// GateEvictAge old gives its place to the next connection, and is a
// strike against its source; a known source's handshake keeps its place.
func TestGateEvictsStalledStrangers(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l, lis, conns := gatedListener(t, 1, clk)
	ctx := context.Background()

	stalled, next := newFake("10.2.0.1"), newFake("10.2.0.2")
	conns <- stalled
	conns <- next

	acceptConn(t, lis)

	// One FirstCall watch, and the accept loop's wait at the gate.
	if err := clk.WaitForTimers(ctx, 2); err != nil {
		t.Fatal(err)
	}

	clk.Advance(GateEvictAge)

	if c := acceptConn(t, lis); c.RemoteAddr() != next.remote {
		t.Fatalf("accepted %v, want %v", c.RemoteAddr(), next.remote)
	}

	if !stalled.closed.Load() {
		t.Fatal("the stalled stranger's handshake was not closed")
	}

	if st := l.Stats(); st.Evicted != 1 {
		t.Fatalf("%d evicted, want 1", st.Evicted)
	}

	// A known source's handshake, once in, is not displaced however long
	// it takes.
	clk2 := clock.NewFake(time.Now())
	l2, lis2, conns2 := gatedListener(t, 1, clk2)
	known := newFake("10.3.0.1")
	l2.Know(known.remote)

	conns2 <- known
	conns2 <- newFake("10.3.0.2")

	acceptConn(t, lis2)

	if err := clk2.WaitForTimers(ctx, 2); err != nil {
		t.Fatal(err)
	}

	clk2.Advance(3 * GateEvictAge)

	// The accept loop asks again and waits again.
	if err := clk2.WaitForTimers(ctx, 2); err != nil {
		t.Fatal(err)
	}

	if known.closed.Load() || len(conns2) != 1 {
		t.Fatalf("a known source's handshake was displaced (closed %v, %d left in the queue)", known.closed.Load(), len(conns2))
	}
}

var errHandshake = errors.New("handshake failed")

// failingCreds is transport credentials whose server handshake fails.
type failingCreds struct {
	credentials.TransportCredentials
}

func (failingCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errHandshake
}
