package trustdclient

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
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

// answered records that endpoint i answered: it is tried in its place again.
func (c *Client) answered(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.retryAt[i] = time.Time{}
}

// failed records that endpoint i failed: it goes after the others until
// its probe, ProbeInterval from now, jittered.
func (c *Client) failed(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.retryAt[i] = c.cfg.Clock.Now().Add(jittered(ProbeInterval, c.cfg.Rand))
}

// Preferred is the endpoint the node asks first while it answers.
func (c *Client) Preferred() string {
	return c.cfg.Endpoints[c.order[0]]
}

// connected waits until conn is up, for ProbeTimeout at most; it fails at
// once when the connection attempt does.
func connected(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()

	conn.Connect()

	for {
		switch s := conn.GetState(); s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("trustdclient: probe: connection %s", s)
		default:
			if !conn.WaitForStateChange(ctx, s) {
				return fmt.Errorf("trustdclient: probe: not connected within %v", ProbeTimeout)
			}
		}
	}
}
