package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/machined/trustdclient"
)

// startTrustdClient makes the worker's one client of the control planes'
// trustd, which its revocation poller and its heartbeats share: it calls
// from the node's listen address, presents the node's server certificate
// as it is now (a connection made with an older one is replaced) and
// verifies trustd against the CAs accepted at each handshake. It is
// closed when the boot ends.
func (n *Node) startTrustdClient(ctx context.Context, b *bootState, bg *sync.WaitGroup) (*trustdclient.Client, error) {
	var pair pairCache

	c, err := trustdclient.New(trustdclient.Config{
		Endpoints: b.cfg.Cluster.ControlPlane.Endpoints,
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			res, _ := n.store.Current()

			return pair.of(res.GetServer())
		},
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

// pairCache parses the node's server certificate once for each new one:
// the trustd client asks for it before every call.
type pairCache struct {
	mu   sync.Mutex
	crt  []byte
	pair *tls.Certificate
}

// of is kp as a TLS certificate.
func (p *pairCache) of(kp *node.KeyPair) (*tls.Certificate, error) {
	if kp == nil {
		return nil, errors.New("node: no server certificate yet")
	}

	p.mu.Lock()
	defer p.mu.Unlock()

	if p.pair != nil && bytes.Equal(p.crt, kp.GetCrt()) {
		return p.pair, nil
	}

	pair, err := tls.X509KeyPair(kp.GetCrt(), kp.GetKey())
	if err != nil {
		return nil, fmt.Errorf("node: the server certificate: %w", err)
	}

	p.crt, p.pair = kp.GetCrt(), &pair

	return p.pair, nil
}
