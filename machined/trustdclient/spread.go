package trustdclient

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/connectivity"
)

// jittered is d spread uniformly over [d/2, 3d/2) by r, so that nodes
// that lost the same control plane at the same moment do not all probe it
// again at the same moment. r is the client's randomness; a short read
// gives d.
func jittered(d time.Duration, r io.Reader) time.Duration {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil || d <= 0 {
		return d
	}

	return d/2 + time.Duration(binary.BigEndian.Uint64(b[:])%uint64(d))
}

// attempt is one endpoint of a call's plan.
type attempt struct {
	index int
	// probe is set for an endpoint that failed and whose ProbeInterval
	// has passed.
	probe bool
}

// plan is the order in which a call tries the endpoints: those that
// answer or are due for a probe, in the node's order; then those that
// failed lately, in the same order, so that a call is never refused only
// because every endpoint failed once.
func (c *Client) plan() []attempt {
	c.mu.Lock()
	defer c.mu.Unlock()

	now := c.cfg.Clock.Now()
	plan := make([]attempt, 0, len(c.order))

	var later []attempt

	for _, i := range c.order {
		switch at := c.retryAt[i]; {
		case at.IsZero():
			plan = append(plan, attempt{index: i})
		case !now.Before(at):
			plan = append(plan, attempt{index: i, probe: true})
		default:
			later = append(later, attempt{index: i})
		}
	}

	return append(plan, later...)
}

// answered records that endpoint i answered: it is tried in its place
// again, and the connections to the others are retired (see Client).
func (c *Client) answered(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.retryAt[i], c.failures[i], c.slowSince[i] = time.Time{}, 0, time.Time{}
	c.retireOthersLocked(c.cfg.Endpoints[i])
}

// slow records that endpoint i, its connection up, answered a call too
// late or refused it as unavailable for now, and reports whether the node
// stays with it: until it has been so for SlowFor, with no answer between.
func (c *Client) slow(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	now := c.cfg.Clock.Now()
	if c.slowSince[i].IsZero() {
		c.slowSince[i] = now
	}

	return now.Sub(c.slowSince[i]) < SlowFor
}

// failed records that endpoint i failed: it goes after the others until
// its probe, jittered, ProbeInterval from now after its first failure in a
// row and twice the interval before after each one since, up to
// MaxProbeInterval.
func (c *Client) failed(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.failures[i]++
	c.retryAt[i] = c.cfg.Clock.Now().Add(jittered(probeInterval(c.failures[i]), c.cfg.Rand))
	c.slowSince[i] = time.Time{}
}

// probeInterval is the interval before the probe of an endpoint that
// failed n times in a row (n ≥ 1).
func probeInterval(n int) time.Duration {
	d := ProbeInterval
	for range n - 1 {
		if d >= MaxProbeInterval/2 {
			return MaxProbeInterval
		}

		d *= 2
	}

	return d
}

// Preferred is the endpoint the node asks first while it answers.
func (c *Client) Preferred() string {
	return c.cfg.Endpoints[c.order[0]]
}

// connected waits until k's connection is up: for ProbeTimeout while no
// TLS handshake is under way on it, and for ProbeHandshakeTimeout in all
// once one is (the control plane answered and is busy; see
// ProbeHandshakeTimeout). It fails at once when the connection attempt
// does.
func connected(parent context.Context, k *kept) error {
	start := time.Now()

	ctx, cancel := context.WithTimeout(parent, ProbeHandshakeTimeout)
	defer cancel()

	k.conn.Connect()

	for {
		s := k.conn.GetState()

		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("trustdclient: probe: connection %s", s)
		}

		wait := ProbeHandshakeTimeout
		if !k.handshaking() {
			wait = ProbeTimeout - time.Since(start)
		}

		if wait <= 0 {
			return fmt.Errorf("trustdclient: probe: not connected within %v", ProbeTimeout)
		}

		wctx, wcancel := context.WithTimeout(ctx, wait)
		changed := k.conn.WaitForStateChange(wctx, s)

		wcancel()

		switch {
		case changed:
		case parent.Err() != nil:
			return fmt.Errorf("trustdclient: probe: %w", parent.Err())
		case ctx.Err() != nil:
			return fmt.Errorf("trustdclient: probe: not connected within %v, its handshake under way", ProbeHandshakeTimeout)
		}
	}
}

// handshaking reports whether a TLS handshake began on k's connection
// lately enough to be under way still: trustd ends one by
// ProbeHandshakeTimeout.
func (k *kept) handshaking() bool {
	at := k.handshake.Load()

	return at != 0 && time.Since(time.Unix(0, at)) < ProbeHandshakeTimeout
}
