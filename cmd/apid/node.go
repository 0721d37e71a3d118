package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/resources"
)

// firstResourcesTimeout bounds the wait for machined's first complete set of
// resources; machined starts apid only once it has them.
const firstResourcesTimeout = time.Minute

// nodeFiles follows apid's resources from machined's apid socket into the
// same holders the file mode uses. Whether the node forwards (holds an
// impersonator certificate) is settled by the first update: a node does not
// turn from worker into control plane without a restart of machined.
type nodeFiles struct {
	files
	self  []string
	ready chan struct{}
}

func (n *nodeFiles) apply(res *node.Resources) error {
	if res.GetServer() == nil || len(res.GetAcceptedCas()) == 0 {
		return errors.New("incomplete resources: waiting for the server certificate and the accepted CAs")
	}

	set, err := ca.ParseAcceptedSet(res.GetAcceptedCas(), time.Now())
	if err != nil {
		return fmt.Errorf("accepted CAs: %w", err)
	}

	first := n.server == nil
	if first {
		n.server = &certs.KeyPair{}
		if res.GetImpersonator() != nil {
			n.forward = &certs.KeyPair{}
		}
	}

	if err = n.server.Set(res.GetServer().GetCrt(), res.GetServer().GetKey()); err != nil {
		return err
	}

	if n.forward != nil && res.GetImpersonator() != nil {
		if err = n.forward.Set(res.GetImpersonator().GetCrt(), res.GetImpersonator().GetKey()); err != nil {
			return err
		}
	}

	n.accepted.Store(set)
	n.members.set(res.GetMembers())

	if first {
		n.self = append([]string{}, res.GetAddresses()...)

		// A host name that is no DNS name (an underscore) cannot name the
		// node in routing metadata; its addresses still do.
		if h := res.GetHostname(); h != "" {
			if _, err := apid.CanonicalNode(h); err == nil {
				n.self = append(n.self, h)
			}
		}

		close(n.ready)
	}

	return nil
}

// loadNode connects to machined and waits for apid's first resources; they
// keep being applied until ctx ends.
func loadNode(ctx context.Context, o *options, log *slog.Logger) (*nodeFiles, error) {
	conn, err := resources.Dial(o.nodeSocket)
	if err != nil {
		return nil, err
	}

	n := &nodeFiles{ready: make(chan struct{})}

	go func() {
		resources.Watch(ctx, conn, log, n.apply)
		conn.Close()
	}()

	wait, cancel := context.WithTimeout(ctx, firstResourcesTimeout)
	defer cancel()

	select {
	case <-n.ready:
		return n, nil
	case <-wait.Done():
		return nil, fmt.Errorf("apid: no resources from machined on %s: %w", o.nodeSocket, wait.Err())
	}
}
