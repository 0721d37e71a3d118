package localcluster

import (
	"context"
	"fmt"
	"time"
)

// Readmit brings a node left behind back into the cluster: one that was
// stopped while the cluster's OS CA or static token rotated, or whose
// folder was restored from a backup older than a rotation. Such a node
// trusts a CA the control planes no longer serve, or holds a token trustd
// no longer takes: it cannot renew, heartbeat or be reached.
//
// Readmit stops the node if it runs, writes its config anew from the
// cluster's secrets bundle as it is now (rotate-ca --secrets and token
// rotate-static --secrets keep the bundle current), starts it with its
// state kept, and waits, until timeout, for every control plane to list
// it as a member. The node itself drops the certificates its new config
// no longer accepts and joins through trustd again with the bundle's
// token, keeping its name and address.
//
// A control plane is refused: it holds the cluster's CA key and is an
// etcd member, and a rotation does not go on while one is away, so it is
// never left behind this way; one restored from an old backup is replaced
// through etcd's member removal instead.
func (c *Cluster) Readmit(ctx context.Context, name string, timeout time.Duration) (Node, error) {
	n, ok := c.NodeByName(name)
	if !ok {
		return Node{}, fmt.Errorf("localcluster: no node %s in cluster %q", name, c.Name)
	}

	if n.Type.IsControlPlane() {
		return n, fmt.Errorf("localcluster: %s is a control plane: it is never left behind by a rotation, which stops while one is away; "+
			"replace it through etcd's member removal (aegisctl etcd remove-member) instead", name)
	}

	if c.running(n) {
		if err := c.stop(n); err != nil {
			return n, err
		}
	}

	// The config is replaced whole and atomically: the node never starts
	// with half of it.
	if err := c.writeNodeConfig(n, nil); err != nil {
		return n, fmt.Errorf("localcluster: writing %s's config from %s: %w", name, c.SecretsPath(), err)
	}

	deadline := time.Now().Add(timeout)

	n, err := c.StartNode(ctx, name, timeout)
	if err != nil {
		return n, err
	}

	cli, err := c.Client(ctx)
	if err != nil {
		return n, err
	}
	defer cli.Close() //nolint:errcheck // short-lived client

	return n, c.waitMembers(ctx, cli, deadline)
}
