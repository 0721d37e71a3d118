package node

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"

	"github.com/aegis-os/aegis/machined/trustdclient"
)

// startTrustdClient makes the worker's one client of the control planes'
// trustd, which its revocation poller and its heartbeats share: it calls
// from the node's listen address, presents the node certificate as it is
// at each handshake and verifies trustd against the CAs accepted then. It
// is closed when the boot ends.
func (n *Node) startTrustdClient(ctx context.Context, b *bootState, bg *sync.WaitGroup) (*trustdclient.Client, error) {
	c, err := trustdclient.New(trustdclient.Config{
		Endpoints:   b.cfg.Cluster.ControlPlane.Endpoints,
		Certificate: n.serverCertificate,
		AcceptedCAs: func() *x509.CertPool { return n.acceptedCAs().Pool() },
		Source:      listenSource(b),
		Clock:       n.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	n.config.setTrustd(b, c)

	bg.Go(func() {
		<-ctx.Done()
		_ = c.Close()
	})

	return c, nil
}
