package apid

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/internal/clock"
)

// testPool returns a pool whose connections point nowhere: grpc.NewClient
// does not connect until a call, and the tests make none.
func testPool(t *testing.T, clk clock.Clock, maxConns int) (*pool, *int) {
	t.Helper()

	return testPoolLimits(t, clk, poolConfig{max: maxConns, perCaller: 1 << 10})
}

// testPoolLimits returns a test pool with the bounds of limits.
func testPoolLimits(t *testing.T, clk clock.Clock, limits poolConfig) (*pool, *int) {
	t.Helper()

	dials := 0
	p := newPool(poolConfig{
		dial: func(tg target) (*grpc.ClientConn, error) {
			dials++

			return grpc.NewClient("passthrough:///"+tg.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		},
		clock: clk, max: limits.max, perCaller: limits.perCaller, reserve: limits.reserve,
		idle: time.Minute,
	})
	t.Cleanup(p.close)

	return p, &dials
}

func tgt(t *testing.T, name string) target {
	t.Helper()

	nn, err := newNodeNames(50000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	nn.members = testMembers{}

	tg, err := nn.parseTarget(name)
	if err != nil {
		t.Fatal(err)
	}

	return tg
}

// Callers of the pool tests.
var (
	admin  = caller{id: testIdentity("admin"), admin: true}
	reader = caller{id: testIdentity("reader")}
)

func TestPoolSharesConnections(t *testing.T) {
	p, dials := testPool(t, clock.NewFake(time.Unix(0, 0)), 4)

	c1, r1, _ := p.get(tgt(t, "10.0.0.1"), admin)
	c2, r2, _ := p.get(tgt(t, "::ffff:10.0.0.1"), reader)

	if c1 != c2 || *dials != 1 {
		t.Fatalf("same address dialed %d times", *dials)
	}

	r1()
	r1() // a release is idempotent
	r2()
}

func TestPoolClosesIdleConnections(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	p, dials := testPool(t, clk, 4)

	c, release, _ := p.get(tgt(t, "10.0.0.1"), admin)

	clk.Advance(2 * time.Minute)

	if _, r, _ := p.get(tgt(t, "10.0.0.2"), admin); r != nil {
		r()
	}

	if p.size() != 2 {
		t.Fatal("a connection in use was swept")
	}

	release()
	clk.Advance(59 * time.Second)

	if _, r, _ := p.get(tgt(t, "10.0.0.2"), admin); r != nil {
		r()
	}

	if p.size() != 2 {
		t.Fatal("swept before the idle timeout")
	}

	clk.Advance(time.Minute)

	if _, r, _ := p.get(tgt(t, "10.0.0.3"), admin); r != nil {
		r()
	}

	if p.size() != 1 || c.GetState() != connectivity.Shutdown {
		t.Fatalf("idle connections not closed: size %d, state %v", p.size(), c.GetState())
	}

	if *dials != 3 {
		t.Fatalf("%d dials", *dials)
	}
}

func TestPoolBound(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	p, _ := testPool(t, clk, 2)

	_, r1, _ := p.get(tgt(t, "10.0.0.1"), admin)
	clk.Advance(time.Second)
	_, r2, _ := p.get(tgt(t, "10.0.0.2"), admin)

	if _, _, err := p.get(tgt(t, "10.0.0.3"), admin); !errors.Is(err, errPoolFull) {
		t.Fatalf("third connection with two in use: %v", err)
	}

	r1()
	clk.Advance(time.Second)
	r2()

	// 10.0.0.1 has been unused for longest: it makes room.
	if _, r, err := p.get(tgt(t, "10.0.0.3"), admin); err != nil {
		t.Fatal(err)
	} else {
		r()
	}

	p.mu.Lock()
	_, kept := p.conns[tgt(t, "10.0.0.2").connKey()]
	p.mu.Unlock()

	if !kept {
		t.Fatal("evicted the connection used most recently")
	}

	p.close()

	if _, _, err := p.get(tgt(t, "10.0.0.4"), admin); !errors.Is(err, errPoolClosed) {
		t.Fatalf("get after close: %v", err)
	}
}

// hold takes the connection to name for c and returns its release; it
// fails the test if the pool refuses.
func hold(t *testing.T, p *pool, name string, c caller) func() {
	t.Helper()

	_, release, err := p.get(tgt(t, name), c)
	if err != nil {
		t.Fatalf("%s for %s: %v", name, c.id, err)
	}

	return release
}

func TestPoolPerCaller(t *testing.T) {
	p, _ := testPoolLimits(t, clock.NewFake(time.Unix(0, 0)), poolConfig{max: 8, perCaller: 2})

	r1 := hold(t, p, "10.0.0.1", reader)
	hold(t, p, "10.0.0.2", reader)

	// Another spelling of a node the reader holds is the same connection.
	hold(t, p, "::ffff:10.0.0.1", reader)()

	if _, _, err := p.get(tgt(t, "10.0.0.3"), reader); !errors.Is(err, errCallerPoolFull) {
		t.Fatalf("third node of one caller: %v", err)
	}

	// Other callers are not held back by the reader, on its nodes or others.
	hold(t, p, "10.0.0.3", admin)
	hold(t, p, "10.0.0.1", caller{id: testIdentity("other reader")})

	r1()
	r1() // a release is idempotent: it frees one slot, once

	hold(t, p, "10.0.0.4", reader)

	if _, _, err := p.get(tgt(t, "10.0.0.5"), reader); !errors.Is(err, errCallerPoolFull) {
		t.Fatalf("after one release, two more: %v", err)
	}
}

func TestPoolAdminReserve(t *testing.T) {
	p, _ := testPoolLimits(t, clock.NewFake(time.Unix(0, 0)), poolConfig{max: 4, perCaller: 4, reserve: 2})

	hold(t, p, "10.0.0.1", reader)
	r2 := hold(t, p, "10.0.0.2", caller{id: testIdentity("reader 2")})

	if _, _, err := p.get(tgt(t, "10.0.0.3"), caller{id: testIdentity("reader 3")}); !errors.Is(err, errPoolFull) {
		t.Fatalf("a reader took the admins' reserve: %v", err)
	}

	// A connection readers already hold costs nothing more.
	hold(t, p, "10.0.0.1", caller{id: testIdentity("reader 3")})

	hold(t, p, "10.0.0.3", admin)
	hold(t, p, "10.0.0.4", admin)

	r2()

	// The admins' connections are in use: a reader gets the freed one
	// only by evicting it.
	hold(t, p, "10.0.0.5", caller{id: testIdentity("reader 3")})

	if p.size() != 4 {
		t.Fatalf("pool of %d connections, bound 4", p.size())
	}
}

// testIdentity is a made-up client identity for the pool's tests.
func testIdentity(name string) identity { return sha256.Sum256([]byte(name)) }

// TestPoolKeepsNameCheckedConnectionsApart: a connection whose peer was
// checked for an address alone does not carry a call for a member's name,
// which needs the name checked too, and two names at one address (a stale
// entry and a live one) get a connection each.
func TestPoolKeepsNameCheckedConnectionsApart(t *testing.T) {
	p, dials := testPool(t, clock.NewFake(time.Unix(0, 0)), 4)

	byAddr := tgt(t, "10.0.0.5")
	byName := byAddr
	byName.name, byName.memberName = "worker-1", "worker-1"
	other := byName
	other.name, other.memberName = "cp-9", "cp-9"

	for _, tg := range []target{byAddr, byName, other, byName} {
		_, release, err := p.get(tg, admin)
		if err != nil {
			t.Fatal(err)
		}

		release()
	}

	if *dials != 3 {
		t.Fatalf("%d dials, want one per address and name checked", *dials)
	}
}
