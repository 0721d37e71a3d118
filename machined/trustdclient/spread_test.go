package trustdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
)

// zeros is a Rand that makes every jitter its least: a probe at half
// ProbeInterval.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// endpoints is a fake set of control planes: a call to one that is down
// fails, and so does a probe's wait for its connection. Nothing reaches
// the network: connections are made lazily, and the call and the probe
// only read the target they were given.
type endpoints struct {
	mu    sync.Mutex
	down  map[string]bool
	tried []string // targets called, and "probe TARGET" for each probe
	// bounded counts the calls whose context had a deadline.
	bounded int
}

func (e *endpoints) call(ctx context.Context, conn grpc.ClientConnInterface) error {
	target := conn.(*grpc.ClientConn).Target()

	e.mu.Lock()
	defer e.mu.Unlock()

	e.tried = append(e.tried, target)

	if _, ok := ctx.Deadline(); ok {
		e.bounded++
	}

	if e.down[target] {
		return errors.New("connection refused")
	}

	return nil
}

func (e *endpoints) ready(_ context.Context, k *kept) error {
	e.mu.Lock()
	defer e.mu.Unlock()

	e.tried = append(e.tried, "probe "+k.conn.Target())

	if e.down[k.conn.Target()] {
		return errors.New("connection refused")
	}

	return nil
}

// reset forgets the endpoints tried so far and returns them.
func (e *endpoints) reset() []string {
	e.mu.Lock()
	defer e.mu.Unlock()

	tried := e.tried
	e.tried = nil

	return tried
}

func (e *endpoints) setDown(target string, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()

	e.down[target] = down
}

// fakeClient is a Client of eps whose probes and calls reach the fake
// endpoints it returns, with the least jitter.
func fakeClient(t *testing.T, clk clock.Clock, eps ...string) (*Client, *endpoints) {
	t.Helper()

	c, err := New(Config{
		Endpoints:   eps,
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil },
		AcceptedCAs: x509.NewCertPool, Source: "10.5.0.17", Clock: clk, Rand: zeros{},
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = c.Close() })

	fake := &endpoints{down: map[string]bool{}}
	c.ready = fake.ready

	return c, fake
}

// TestFailoverAndReturn: a worker calls its preferred control plane;
// when that fails, the next in its fixed order, without trying the failed
// one again until the probe is due; a probe that finds no connection
// skips the endpoint, and puts the next probe twice as far off; once the
// preferred answers again, the worker is back on it, and its call keeps
// the caller's context (a stream is not cut).
func TestFailoverAndReturn(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	all := []string{"10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001"}

	c, fake := fakeClient(t, clk, all...)

	mustAnswer := func(want string, tried ...string) {
		t.Helper()

		got, err := c.Call(ctx, fake.call)
		if err != nil || got != want {
			t.Fatalf("Call answered by %q (%v), want %q", got, err, want)
		}

		if seen := fake.reset(); !slices.Equal(seen, tried) {
			t.Fatalf("Call tried %v, want %v", seen, tried)
		}
	}

	preferred := c.Preferred()
	mustAnswer(preferred, preferred)

	// The preferred fails: the call goes on to the next, and so do the
	// calls after it, always to the same one.
	fake.setDown(preferred, true)

	got, err := c.Call(ctx, fake.call)
	if err != nil || got == preferred {
		t.Fatalf("Call with %s down: %q, %v", preferred, got, err)
	}

	next := got
	fake.reset()

	for range 3 {
		mustAnswer(next, next)
	}

	// The next fails too: the third, then back to the next once it is up.
	fake.setDown(next, true)

	third := all[slices.IndexFunc(all, func(s string) bool { return s != preferred && s != next })]
	mustAnswer(third, next, third)
	fake.setDown(next, false)

	// Half the ProbeInterval (the least jitter): the preferred is probed
	// first and finds no connection, so it is not called; the next, due
	// for its probe too, answers.
	clk.Advance(ProbeInterval/2 - time.Millisecond)
	mustAnswer(third, third)
	clk.Advance(time.Millisecond)
	mustAnswer(next, "probe "+preferred, "probe "+next, next)

	// Back: the preferred's probe failed, its second failure in a row, so
	// the next probe is twice as far off; it finds the preferred
	// answering, and the worker stays there.
	fake.setDown(preferred, false)
	clk.Advance(ProbeInterval / 2)
	mustAnswer(next, next)
	clk.Advance(ProbeInterval / 2)
	mustAnswer(preferred, "probe "+preferred, preferred)
	mustAnswer(preferred, preferred)

	if fake.bounded != 0 {
		t.Fatalf("%d calls had a deadline the caller did not set", fake.bounded)
	}

	// When every endpoint failed lately, a call still tries them all.
	for _, ep := range all {
		fake.setDown(ep, true)
	}

	if _, err := c.Call(ctx, fake.call); err == nil {
		t.Fatal("a call with every endpoint down answered")
	}

	fake.reset()
	fake.setDown(next, false)

	if got, err := c.Call(ctx, fake.call); err != nil || got != next {
		t.Fatalf("Call with only %s up, every endpoint failed lately: %q, %v", next, got, err)
	}
}

// TestProbesOfAFailingEndpointBackOff: each failure of an endpoint in a
// row doubles the interval before its next probe, up to MaxProbeInterval;
// an answer brings it back to ProbeInterval.
func TestProbesOfAFailingEndpointBackOff(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))

	c, fake := fakeClient(t, clk, "10.5.0.2:50001", "10.5.0.3:50001")
	preferred := c.Preferred()

	// probedAfter advances the clock by d less a millisecond, where the
	// preferred must not be probed yet, and by the millisecond left,
	// where it must be.
	probedAfter := func(d time.Duration) {
		t.Helper()

		clk.Advance(d - time.Millisecond)
		fake.reset()

		if _, err := c.Call(ctx, fake.call); err != nil {
			t.Fatal(err)
		}

		if tried := fake.reset(); slices.Contains(tried, "probe "+preferred) {
			t.Fatalf("the preferred was probed %v early", time.Millisecond)
		}

		clk.Advance(time.Millisecond)

		if _, err := c.Call(ctx, fake.call); err != nil {
			t.Fatal(err)
		}

		if tried := fake.reset(); !slices.Contains(tried, "probe "+preferred) {
			t.Fatalf("the preferred was not probed %v after its last failure: %v", d, tried)
		}
	}

	fake.setDown(preferred, true)

	if _, err := c.Call(ctx, fake.call); err != nil {
		t.Fatal(err)
	}

	// The least jitter is half the interval: 5 s, 10 s, 20 s, then the
	// cap's half, 30 s, from then on.
	for _, d := range []time.Duration{5, 10, 20, 30, 30} {
		probedAfter(d * time.Second)
	}

	// Up again: the probe finds it, and its next failure is a first one.
	fake.setDown(preferred, false)
	clk.Advance(MaxProbeInterval / 2)

	if got, err := c.Call(ctx, fake.call); err != nil || got != preferred {
		t.Fatalf("Call with the preferred up again: %q, %v", got, err)
	}

	fake.setDown(preferred, true)

	if _, err := c.Call(ctx, fake.call); err != nil {
		t.Fatal(err)
	}

	probedAfter(ProbeInterval / 2)
}

// TestIdentityPicksThePreferred: two clients of one identity prefer the
// same endpoint whatever the order of their endpoints; Identity wins over
// Source.
func TestIdentityPicksThePreferred(t *testing.T) {
	all := []string{"10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001"}
	rev := slices.Clone(all)
	slices.Reverse(rev)

	preferred := func(eps []string, source, identity string) string {
		c, err := New(Config{
			Endpoints: eps, Source: source, Identity: identity,
			Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return nil, nil },
			AcceptedCAs: x509.NewCertPool,
		})
		if err != nil {
			t.Fatal(err)
		}

		defer c.Close()

		return c.Preferred()
	}

	if a, b := preferred(all, "10.5.0.9", ""), preferred(rev, "10.5.0.9", ""); a != b {
		t.Fatalf("one source prefers %s, or %s with the endpoints reversed", a, b)
	}

	if a, b := preferred(all, "10.5.0.9", "worker-7"), preferred(all, "10.5.0.200", "worker-7"); a != b {
		t.Fatalf("one identity prefers %s from one source and %s from another", a, b)
	}
}
