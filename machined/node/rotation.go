package node

import (
	"context"
	"crypto/x509"

	"github.com/aegis-os/aegis/machined/rotation"
)

// rotationStore is the CA rotation state in the node's etcd, or
// rotation.ErrNoEtcd.
func (n *Node) rotationStore() (*rotation.Store, error) {
	cli, err := n.etcd.client(rotation.ErrNoEtcd, rotation.ErrUnavailable)
	if err != nil {
		return nil, err
	}

	return rotation.NewStore(rotation.StoreConfig{Client: cli})
}

// reissue re-issues the node's certificates now from the CA in effect: a
// CA rotation's way to move every node to the new CA without waiting for
// renewals.
func (n *Node) reissue(ctx context.Context) (map[string]*x509.Certificate, error) {
	c := n.config.certController()
	if c == nil {
		return nil, errNoCertificatesYet
	}

	return c.reissue(ctx)
}
