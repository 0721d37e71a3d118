package connlimit

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/internal/clock"
)

// gateTest is a Limiter that lets max handshakes be under way at once,
// and transport credentials whose handshakes the test ends one by one.
type gateTest struct {
	t       *testing.T
	l       *Limiter
	clk     *clock.Fake
	creds   credentials.TransportCredentials
	started chan string // the source of each handshake that started
	clients map[string]net.Conn

	mu     sync.Mutex
	finish map[string]chan struct{}
}

// finishOf is the channel that ends ip's handshake.
func (g *gateTest) finishOf(ip string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()

	return g.finish[ip]
}

func newGateTest(t *testing.T, max int) *gateTest {
	t.Helper()

	clk := clock.NewFake(time.Now())

	l, err := New(Config{
		PerSource: 3, Total: 16, FirstCall: time.Minute, Clock: clk, MaxHandshakes: max,
		ProvenTotal: 16, ProvenPerSource: 4, HandshakeRoom: 4,
	})
	if err != nil {
		t.Fatal(err)
	}

	g := &gateTest{
		t: t, l: l, clk: clk, started: make(chan string, 16),
		finish: map[string]chan struct{}{}, clients: map[string]net.Conn{},
	}
	g.creds = l.Credentials(heldCreds{g: g}, func(tls.ConnectionState) bool { return false })

	return g
}

// connect admits a connection from ip and starts its server handshake; it
// returns the admitted connection.
func (g *gateTest) connect(ip string) *conn {
	g.t.Helper()

	srv, cli := net.Pipe()
	g.t.Cleanup(func() { _ = cli.Close(); _ = srv.Close() })

	raw := pipeConn{Conn: srv, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	g.mu.Lock()
	g.finish[ip] = make(chan struct{})
	g.mu.Unlock()

	g.clients[ip] = cli

	c := g.l.admit(raw, fakeLocal)
	if c == nil {
		g.t.Fatalf("connection from %s refused", ip)
	}

	go func() { _, _, _ = g.creds.ServerHandshake(c) }()

	return c
}

// hello makes ip's client send its first byte.
func (g *gateTest) hello(ip string) {
	g.t.Helper()

	cli := g.clients[ip]

	go func() { _, _ = cli.Write([]byte{0x16}) }()
}

// wantStarted waits for the next handshake to start and checks its source.
func (g *gateTest) wantStarted(ip string) {
	g.t.Helper()

	select {
	case got := <-g.started:
		if got != ip {
			g.t.Fatalf("the handshake of %s started, want %s", got, ip)
		}
	case <-time.After(5 * time.Second):
		g.t.Fatalf("the handshake of %s did not start", ip)
	}
}

// waitWaiting waits until n handshakes wait at the gate, then checks that
// none started meanwhile.
func (g *gateTest) waitWaiting(n int) {
	g.t.Helper()

	deadline := time.Now().Add(5 * time.Second)

	for {
		g.l.mu.Lock()
		waiting := 0

		for i := range g.l.gate.waiting {
			waiting += g.l.gate.waiting[i].Len()
		}
		g.l.mu.Unlock()

		if waiting == n {
			break
		}

		if time.Now().After(deadline) {
			g.t.Fatalf("%d handshakes wait at the gate, want %d", waiting, n)
		}

		time.Sleep(time.Millisecond)
	}

	select {
	case got := <-g.started:
		g.t.Fatalf("the handshake of %s started while the gate was full", got)
	default:
	}
}

// TestGateBoundsHandshakes: no more than MaxHandshakes handshakes are under
// way; one whose client sent nothing takes no place; a handshake that ends
// lets the next one start.
func TestGateBoundsHandshakes(t *testing.T) {
	g := newGateTest(t, 2)

	for _, ip := range []string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"} {
		g.connect(ip)
	}

	// The first has sent nothing: the next two take the places.
	g.hello("10.1.0.2")
	g.wantStarted("10.1.0.2")
	g.hello("10.1.0.3")
	g.wantStarted("10.1.0.3")

	g.hello("10.1.0.4")
	g.waitWaiting(1)

	close(g.finishOf("10.1.0.2"))
	g.wantStarted("10.1.0.4")

	// The silent one begins at last, and waits for a place.
	g.hello("10.1.0.1")
	g.waitWaiting(1)

	close(g.finishOf("10.1.0.3"))
	g.wantStarted("10.1.0.1")
}

// TestGateOrder: a freed place goes to a known source's handshake first,
// then a stranger's, then a suspect's, the newest first in each.
func TestGateOrder(t *testing.T) {
	g := newGateTest(t, 1)

	g.connect("10.2.0.1")
	g.hello("10.2.0.1")
	g.wantStarted("10.2.0.1")

	g.l.mu.Lock()
	g.l.wastedLocked("10.2.0.9")
	g.l.wastedLocked("10.2.0.9")
	g.l.mu.Unlock()
	g.l.Know(&net.TCPAddr{IP: net.ParseIP("10.2.0.5")})

	for i, ip := range []string{"10.2.0.9", "10.2.0.2", "10.2.0.3", "10.2.0.5"} {
		g.connect(ip)
		g.hello(ip)
		g.waitWaiting(i + 1)
	}

	for _, next := range [][2]string{{"10.2.0.1", "10.2.0.5"}, {"10.2.0.5", "10.2.0.3"}, {"10.2.0.3", "10.2.0.2"}, {"10.2.0.2", "10.2.0.9"}} {
		close(g.finishOf(next[0]))
		g.wantStarted(next[1])
	}
}

// TestGateDisplacesStalledStrangers: a stranger's handshake that held its
// place for GateEvictAge while another waits gives it up, closed and
// struck; a known source's keeps it.
func TestGateDisplacesStalledStrangers(t *testing.T) {
	g := newGateTest(t, 1)
	ctx := context.Background()

	stalled := g.connect("10.3.0.1")
	g.hello("10.3.0.1")
	g.wantStarted("10.3.0.1")

	g.connect("10.3.0.2")
	g.hello("10.3.0.2")
	g.waitWaiting(1)

	// Two FirstCall watches and the waiter's timer.
	if err := g.clk.WaitForTimers(ctx, 3); err != nil {
		t.Fatal(err)
	}

	g.clk.Advance(GateEvictAge)
	g.wantStarted("10.3.0.2")

	if stalled.state.Load() != stateClosed || g.l.Stats().Evicted != 1 {
		t.Fatalf("the stalled handshake: state %d, %d evicted; want closed, 1", stalled.state.Load(), g.l.Stats().Evicted)
	}

	k := newGateTest(t, 1)
	k.l.Know(&net.TCPAddr{IP: net.ParseIP("10.4.0.1")})

	k.connect("10.4.0.1")
	k.hello("10.4.0.1")
	k.wantStarted("10.4.0.1")

	k.connect("10.4.0.2")
	k.hello("10.4.0.2")
	k.waitWaiting(1)

	if err := k.clk.WaitForTimers(ctx, 3); err != nil {
		t.Fatal(err)
	}

	k.clk.Advance(3 * GateEvictAge)

	// The waiter looks again, and waits again.
	if err := k.clk.WaitForTimers(ctx, 3); err != nil {
		t.Fatal(err)
	}

	k.waitWaiting(1)
}

var errHandshake = errors.New("handshake failed")

// heldCreds is transport credentials whose server handshake reads the
// client's first byte, says it started, and fails when the test ends it.
type heldCreds struct {
	credentials.TransportCredentials

	g *gateTest
}

func (h heldCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var b [1]byte
	if _, err := raw.Read(b[:]); err != nil {
		return nil, nil, err
	}

	ip := raw.RemoteAddr().(*net.TCPAddr).IP.String() //nolint:forcetypeassert // pipeConn's
	h.g.started <- ip

	select {
	case <-h.g.finishOf(ip):
	case <-raw.(*conn).done: //nolint:forcetypeassert // the Limiter's
	}

	return nil, nil, errHandshake
}

// pipeConn is one end of a net.Pipe from remote.
type pipeConn struct {
	net.Conn

	remote net.Addr
}

func (p pipeConn) RemoteAddr() net.Addr { return p.remote }
func (p pipeConn) LocalAddr() net.Addr  { return fakeLocal }

// TestHandshakeUnderWayIsNotEvicted: a newcomer that finds every slot
// taken evicts the oldest connection without a call whose handshake has
// not begun, never the older one whose handshake is under way: its CPU is
// being spent, and the newcomer would spend as much again.
func TestHandshakeUnderWayIsNotEvicted(t *testing.T) {
	g := newGateTest(t, 1)

	busy := g.connect("10.5.0.1")
	g.hello("10.5.0.1")
	g.wantStarted("10.5.0.1")

	idle := g.connect("10.5.0.2")
	for i := 3; i <= 16; i++ {
		g.connect(fmt.Sprintf("10.5.0.%d", i))
	}

	if c, _ := admitFrom(g.l, "10.5.1.1"); c == nil {
		t.Fatal("the newcomer was refused, with connections without a call to evict")
	}

	if busy.state.Load() == stateClosed {
		t.Fatal("the newcomer evicted the connection whose handshake was under way")
	}

	if idle.state.Load() != stateClosed {
		t.Fatal("the oldest connection whose handshake had not begun was not evicted")
	}
}

// TestProving: a connection proves itself while its handshake is under
// way at the gate and for MinEvictAge after it ended; before its first
// handshake, and once that second passed without a call, it does not.
func TestProving(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

	for _, tc := range []struct {
		name string
		c    *conn
		want bool
	}{
		{"no handshake yet", &conn{}, false},
		{"handshake under way", &conn{atGate: &list.Element{}}, true},
		{"handshake just ended", &conn{leftGate: now.Add(-MinEvictAge + time.Millisecond)}, true},
		{"idle after its handshake", &conn{leftGate: now.Add(-MinEvictAge)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.provingLocked(now); got != tc.want {
				t.Fatalf("provingLocked = %v, want %v", got, tc.want)
			}
		})
	}
}
