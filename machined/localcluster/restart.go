package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Restart stops every node (workers first, as Destroy does), keeping their
// state, then starts them all at once, as after a power cut of the whole
// cluster, and waits until every node is ready and every service of every
// node is up: etcd restarts from its data without a new bootstrap.
func (c *Cluster) Restart(ctx context.Context, timeout time.Duration) error {
	var errs []error

	for i := len(c.Nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.stop(c.Nodes[i]))
	}

	if err := errors.Join(errs...); err != nil {
		return err
	}

	offsets := make(map[string]int64, len(c.Nodes))

	for _, n := range c.Nodes {
		if st, err := os.Stat(c.LogPath(n)); err == nil {
			offsets[n.Name] = st.Size()
		}
	}

	if err := c.startAll(); err != nil {
		return err
	}

	deadline := time.Now().Add(timeout)

	// The control planes wait for each other's etcd: all boot together.
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n, offsets[n.Name], time.Until(deadline)); err != nil {
			return fmt.Errorf("localcluster: restarting the cluster: %w", err)
		}
	}

	return c.checkServices(ctx, deadline)
}
