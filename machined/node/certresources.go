package node

import (
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

	c.resourceErr("certificates", c.res.SetCertificates(list, res.GetAcceptedCas()))
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
