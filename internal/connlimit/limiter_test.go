package connlimit

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
)

// fakeConn is the accepted end of a connection from remote; it records
// whether it was closed.
type fakeConn struct {
	net.Conn // nil: only the methods below are used

	remote net.Addr
	closed atomic.Bool
}

var fakeLocal = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50001}

var nextPort atomic.Int32

func newFake(ip string) *fakeConn {
	return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000 + int(nextPort.Add(1))}}
}

func (f *fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f *fakeConn) LocalAddr() net.Addr  { return fakeLocal }
func (f *fakeConn) Close() error         { f.closed.Store(true); return nil }

// fakeListener hands out the connections sent on conns.
type fakeListener struct{ conns chan net.Conn }

func (f fakeListener) Accept() (net.Conn, error) {
	c, ok := <-f.conns
	if !ok {
		return nil, net.ErrClosed
	}

	return c, nil
}

func (f fakeListener) Close() error   { return nil }
func (f fakeListener) Addr() net.Addr { return fakeLocal }

func newLimiter(t *testing.T, perSource, total int, clk clock.Clock) *Limiter {
	t.Helper()

	l, err := New(Config{PerSource: perSource, Total: total, FirstCall: 5 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	return l
}

// admitFrom offers a connection from ip; it returns the admitted connection
// (nil if refused) and the raw one.
func admitFrom(l *Limiter, ip string) (*conn, *fakeConn) {
	raw := newFake(ip)

	return l.admit(raw, fakeLocal), raw
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no per-source cap":       {Total: 10, FirstCall: time.Second},
		"no total cap":            {PerSource: 10, FirstCall: time.Second},
		"one source takes all":    {PerSource: 10, Total: 10, FirstCall: time.Second},
		"no first-call deadline":  {PerSource: 1, Total: 10},
		"negative first-call cap": {PerSource: 1, Total: 10, FirstCall: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

func TestPerSourceCap(t *testing.T) {
	l := newLimiter(t, 3, 100, clock.NewFake(time.Now()))

	for i := range 3 {
		if c, _ := admitFrom(l, "127.0.0.2"); c == nil {
			t.Fatalf("connection %d of the source refused", i+1)
		}
	}

	c, raw := admitFrom(l, "127.0.0.2")
	if c != nil || !raw.closed.Load() {
		t.Fatal("a connection over the source's cap was kept")
	}

	if c, _ := admitFrom(l, "127.0.0.3"); c == nil {
		t.Fatal("a second source was refused while the first holds its cap")
	}

	if got := l.Stats(); got.Open != 4 || got.Refused != 1 {
		t.Fatalf("stats %+v, want 4 open and 1 refused", got)
	}
}

func TestFullTableEvictsTheOldestWithoutACall(t *testing.T) {
	l := newLimiter(t, 3, 4, clock.NewFake(time.Now()))

	caller, _ := admitFrom(l, "127.0.0.2")
	caller.markCalled()

	_, oldest := admitFrom(l, "127.0.0.3")
	_, older := admitFrom(l, "127.0.0.2")
	admitFrom(l, "127.0.0.4")

	// Every slot is taken: each newcomer takes the slot of the oldest
	// connection without a call, whatever its source; the caller keeps its.
	for i, victim := range []*fakeConn{oldest, older} {
		if c, _ := admitFrom(l, "127.0.0.5"); c == nil {
			t.Fatalf("newcomer %d refused", i+1)
		}

		if !victim.closed.Load() {
			t.Fatalf("newcomer %d: the oldest connection without a call was not evicted", i+1)
		}
	}

	if caller.state.Load() != stateCalled {
		t.Fatal("the connection that made a call was evicted")
	}

	if got := l.Stats(); got.Open != 4 || got.Evicted != 2 || got.Refused != 0 {
		t.Fatalf("stats %+v, want 4 open, 2 evicted, none refused", got)
	}
}

func TestConnectionsWithACallAreNotEvicted(t *testing.T) {
	l := newLimiter(t, 3, 4, clock.NewFake(time.Now()))

	for _, ip := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		c, _ := admitFrom(l, ip)
		c.markCalled()
	}

	if c, _ := admitFrom(l, "127.0.0.4"); c != nil {
		t.Fatal("a connection with a call was evicted")
	}
}

func TestCloseReleasesTheSlot(t *testing.T) {
	l := newLimiter(t, 2, 3, clock.NewFake(time.Now()))

	first, _ := admitFrom(l, "127.0.0.2")
	admitFrom(l, "127.0.0.2")

	if c, _ := admitFrom(l, "127.0.0.2"); c != nil {
		t.Fatal("over the cap")
	}

	// Twice: the second Close must not free a second slot.
	first.Close()
	first.Close()

	if c, _ := admitFrom(l, "127.0.0.2"); c == nil {
		t.Fatal("the slot of a closed connection was not released")
	}

	if c, _ := admitFrom(l, "127.0.0.2"); c != nil {
		t.Fatal("closing twice released two slots")
	}

	if got := l.Stats(); got.Open != 2 {
		t.Fatalf("%d open, want 2", got.Open)
	}
}

func TestFirstCallDeadline(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l := newLimiter(t, 10, 100, clk)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	idle, idleRaw := admitFrom(l, "127.0.0.2")

	// Only then the second: the timer waited for is the first's.
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	busy, busyRaw := admitFrom(l, "127.0.0.2")
	busy.markCalled()

	clk.Advance(4 * time.Second)

	if idleRaw.closed.Load() {
		t.Fatal("closed before the deadline")
	}

	clk.Advance(time.Second)

	select {
	case <-idle.done:
	case <-ctx.Done():
		t.Fatal("a connection without a call was not closed at the deadline")
	}

	if !idleRaw.closed.Load() || busyRaw.closed.Load() {
		t.Fatalf("closed: without a call %v, with a call %v", idleRaw.closed.Load(), busyRaw.closed.Load())
	}

	if got := l.Stats(); got.Open != 1 || got.Expired != 1 {
		t.Fatalf("stats %+v, want 1 open and 1 expired", got)
	}
}

func TestAcceptSkipsRefusedConnections(t *testing.T) {
	l := newLimiter(t, 1, 10, clock.NewFake(time.Now()))
	conns := make(chan net.Conn, 3)
	lis := l.Wrap(fakeListener{conns: conns})

	a1, a2, b := newFake("127.0.0.2"), newFake("127.0.0.2"), newFake("127.0.0.3")
	conns <- a1
	conns <- a2
	conns <- b
	close(conns)

	for _, want := range []*fakeConn{a1, b} {
		c, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}

		if c.RemoteAddr() != want.remote {
			t.Fatalf("accepted %v, want %v", c.RemoteAddr(), want.remote)
		}
	}

	if !a2.closed.Load() {
		t.Fatal("the connection over the cap was not closed")
	}

	if _, err := lis.Accept(); err == nil {
		t.Fatal("Accept of a closed listener returned no error")
	}
}

func TestSourceOf(t *testing.T) {
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netipMust(s)) }

	for _, tc := range []struct {
		name string
		a, b net.Addr
		same bool
	}{
		{"IPv4 other port", tcp("192.0.2.1:1"), tcp("192.0.2.1:2"), true},
		{"IPv4 other address", tcp("192.0.2.1:1"), tcp("192.0.2.2:1"), false},
		{"IPv4-mapped IPv6", tcp("[::ffff:192.0.2.1]:1"), tcp("192.0.2.1:2"), true},
		{"IPv6 same /64", tcp("[2001:db8:1:2::1]:1"), tcp("[2001:db8:1:2:ffff::9]:2"), true},
		{"IPv6 other /64", tcp("[2001:db8:1:2::1]:1"), tcp("[2001:db8:1:3::1]:1"), false},
		{"Unix socket", &net.UnixAddr{Name: "@", Net: "unix"}, &net.UnixAddr{Name: "@", Net: "unix"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sourceOf(tc.a) == sourceOf(tc.b); got != tc.same {
				t.Fatalf("%s and %s: same source %v, want %v", sourceOf(tc.a), sourceOf(tc.b), got, tc.same)
			}
		})
	}
}

// TestRefusalsAreLoggedInAggregate: a flood refuses thousands of
// connections; the log gets one record per RefusalLogInterval with the
// count, not one per connection.
func TestRefusalsAreLoggedInAggregate(t *testing.T) {
	var sink logtest.Sink

	clk := clock.NewFake(time.Now())

	l, err := New(Config{PerSource: 1, Total: 10, FirstCall: time.Minute, Clock: clk, Logger: sink.Logger()})
	if err != nil {
		t.Fatal(err)
	}

	admitFrom(l, "127.0.0.2")

	for range 5 {
		admitFrom(l, "127.0.0.2")
	}

	clk.Advance(RefusalLogInterval)
	admitFrom(l, "127.0.0.2")

	recs := sink.Find(t, "connections refused: source or total connection cap reached")
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %v", len(recs), recs)
	}

	for i, want := range []float64{1, 5} {
		if got := recs[i][logkey.Refused]; got != want || recs[i][logkey.Source] != "127.0.0.2" {
			t.Errorf("record %d: %v, want %v refused from 127.0.0.2", i, recs[i], want)
		}
	}
}
