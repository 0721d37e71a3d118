package node

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// certResources sets the Certificates resources from the node's state: the
// resources store, the config in effect and what its etcd reports.
type certResources struct {
	deps
	config *configState
	etcd   *etcdState
	// mu makes the updates one at a time, each from the latest state.
	mu sync.Mutex
	// last is the digest of what the resources were last set from: the
	// store changes with every change of the member list, and the
	// certificates' resources (a parse and a signature check of each)
	// are set again only when what they are made of changed.
	last [sha256.Size]byte
}

// refresh sets the certificate resources from the resources store (the
// node's API certificates, the OS CA, the accepted CAs) and, on a control
// plane, the etcd CA, the CAs its member loaded and etcd's certificates as
// last issued.
func (c *certResources) refresh() {
	c.mu.Lock()
	defer c.mu.Unlock()

	res, _ := c.store.Current()
	list := []resourceapi.Certificate{
		{ID: "server", Kind: resourcetypes.CertKindServer, PEM: res.GetServer().GetCrt()},
		{ID: "impersonator", Kind: resourcetypes.CertKindImpersonator, PEM: res.GetImpersonator().GetCrt()},
		{ID: "os-ca", Kind: resourcetypes.CertKindOSCA, PEM: res.GetOsCa().GetCrt()},
	}

	if etcdCA := c.config.current().EtcdCA(); etcdCA != nil {
		list = append(list, resourceapi.Certificate{ID: "etcd-ca", Kind: resourcetypes.CertKindEtcdCA, PEM: etcdCA.CertPEM})
	}

	list = append(list, c.etcd.trustedResources()...)
	list = append(list, c.etcd.issuedResources()...)

	sum := digest(list, res.GetAcceptedCas())
	if sum == c.last {
		return
	}

	err := c.res.SetCertificates(list, res.GetAcceptedCas())
	c.resourceErr("certificates", err)

	if err == nil {
		c.last = sum
	}
}

// digest is what the certificates' resources are made of, as a digest.
func digest(list []resourceapi.Certificate, acceptedPEM []byte) [sha256.Size]byte {
	h := sha256.New()

	for _, crt := range list {
		for _, part := range [][]byte{[]byte(crt.ID), []byte(crt.Kind), crt.PEM} {
			var n [8]byte

			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
	}

	h.Write(acceptedPEM)

	var out [sha256.Size]byte

	copy(out[:], h.Sum(nil))

	return out
}

// etcdIssued records a certificate etcd was issued (etcd.Config.OnIssue).
func (c *certResources) etcdIssued(name string, certPEM []byte) {
	c.etcd.recordIssued(name, certPEM)
	c.refresh()
}

// etcdTrustLoaded records the trusted CAs the member loaded at its start,
// nil at its end (etcd.Config.OnTrust).
func (c *certResources) etcdTrustLoaded(trustedPEM []byte) {
	c.etcd.setLoaded(trustedPEM)
	c.refresh()
}
