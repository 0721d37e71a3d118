package apid

import (
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

	dials := 0
	p := newPool(poolConfig{
		dial: func(tg target) (*grpc.ClientConn, error) {
			dials++

			return grpc.NewClient("passthrough:///"+tg.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		},
		clock: clk,
		max:   maxConns,
		idle:  time.Minute,
	})
	t.Cleanup(p.close)

	return p, &dials
}

func tgt(t *testing.T, name string) target {
	t.Helper()

	tg, err := parseTarget(name, 50000)
	if err != nil {
		t.Fatal(err)
	}

	return tg
}

func TestPoolSharesConnections(t *testing.T) {
	p, dials := testPool(t, clock.NewFake(time.Unix(0, 0)), 4)

	c1, r1, _ := p.get(tgt(t, "10.0.0.1"))
	c2, r2, _ := p.get(tgt(t, "10.0.0.1:50000"))

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

	c, release, _ := p.get(tgt(t, "10.0.0.1"))

	clk.Advance(2 * time.Minute)

	if _, r, _ := p.get(tgt(t, "10.0.0.2")); r != nil {
		r()
	}

	if p.size() != 2 {
		t.Fatal("a connection in use was swept")
	}

	release()
	clk.Advance(59 * time.Second)

	if _, r, _ := p.get(tgt(t, "10.0.0.2")); r != nil {
		r()
	}

	if p.size() != 2 {
		t.Fatal("swept before the idle timeout")
	}

	clk.Advance(time.Minute)

	if _, r, _ := p.get(tgt(t, "10.0.0.3")); r != nil {
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

	_, r1, _ := p.get(tgt(t, "10.0.0.1"))
	clk.Advance(time.Second)
	_, r2, _ := p.get(tgt(t, "10.0.0.2"))

	if _, _, err := p.get(tgt(t, "10.0.0.3")); !errors.Is(err, errPoolFull) {
		t.Fatalf("third connection with two in use: %v", err)
	}

	r1()
	clk.Advance(time.Second)
	r2()

	// 10.0.0.1 has been unused for longest: it makes room.
	if _, r, err := p.get(tgt(t, "10.0.0.3")); err != nil {
		t.Fatal(err)
	} else {
		r()
	}

	p.mu.Lock()
	_, kept := p.conns["10.0.0.2:50000"]
	p.mu.Unlock()

	if !kept {
		t.Fatal("evicted the connection used most recently")
	}

	p.close()

	if _, _, err := p.get(tgt(t, "10.0.0.4")); !errors.Is(err, errPoolClosed) {
		t.Fatalf("get after close: %v", err)
	}
}
