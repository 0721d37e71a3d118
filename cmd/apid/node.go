package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/routing"
	"github.com/aegis-os/aegis/machined/resources"
)

// nodeFiles follows apid's resources from machined's apid socket into the
// same holders the file mode uses. Whether the node forwards (holds an
// impersonator certificate) is settled by the first update: a node does not
// turn from worker into control plane without a restart of machined.
type nodeFiles struct {
	files
	self []string
	// role is the node's role from its machine config, settled by the
	// first update like forwarding.
	role  string
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

	serials := make([]string, 0, len(res.GetRevoked()))
	for _, r := range res.GetRevoked() {
		serials = append(serials, r.GetSerial())
	}

	n.revoked.Set(serials)

	if first {
		n.self = append([]string{}, res.GetAddresses()...)
		n.role = res.GetRole()

		// A host name that is no DNS name (an underscore) cannot name the
		// node in routing metadata; its addresses still do.
		if h := res.GetHostname(); h != "" {
			if _, err := routing.Canonical(h); err == nil {
				n.self = append(n.self, h)
			}
		}

		close(n.ready)
	}

	return nil
}

// loadNode connects to machined and waits for apid's first resources; they
// keep being applied until ctx ends, and so does the member list.
func loadNode(ctx context.Context, o *options, log *slog.Logger) (*nodeFiles, error) {
	n := &nodeFiles{ready: make(chan struct{})}

	if err := resources.FollowMembers(ctx, o.nodeSocket, log, n.members.apply); err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	if _, err := resources.Follow(ctx, o.nodeSocket, log, n.ready, n.apply); err != nil {
		return nil, fmt.Errorf("apid: %w", err)
	}

	return n, nil
}
