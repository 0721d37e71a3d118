package certs

import (
	"crypto/x509"
	"slices"
	"time"

	"github.com/aegis-os/aegis/ca"
)

// Ports of etcd on a control plane, as Talos uses them.
const (
	EtcdClientPort = 2379
	EtcdPeerPort   = 2380
)

// EtcdSpec is the cluster's etcd, as Talos lays it out (cluster.etcd).
type EtcdSpec struct {
	// CA is the etcd CA, certificate and key, that control planes issue
	// etcd's server, peer and client certificates from. Required on control
	// planes unless Disabled; workers carry none.
	CA *CertAndKey `yaml:"ca,omitempty"`
	// AcceptedCAs are etcd CAs trusted besides CA, certificates only: the
	// overlap of an etcd CA rotation, when members and clients must trust
	// both the CA that issued their peers' certificates and the one that
	// will. Empty outside a rotation.
	AcceptedCAs []CertAndKey `yaml:"acceptedCAs,omitempty"`
	// Disabled makes a control plane that runs no etcd: a test-only node
	// beside a cluster, which must never become one of its members.
	Disabled bool `yaml:"disabled,omitempty"`
}

// EtcdCA returns the etcd CA with its key on a control plane that runs
// etcd, nil otherwise.
func (c *MachineConfig) EtcdCA() *ca.CA { return c.etcdCA }

// EtcdTrustedCAs returns the etcd CAs a control plane's member and its
// clients trust: the etcd CA first, then the accepted ones; nil where
// EtcdCA is.
func (c *MachineConfig) EtcdTrustedCAs() []*x509.Certificate { return slices.Clone(c.etcdTrusted) }

// validateEtcd checks the etcd section: only control planes carry the CA,
// always with its key, and the accepted etcd CAs.
func (c *MachineConfig) validateEtcd(ps *problems, now time.Time) {
	pair := c.Cluster.Etcd.CA
	accepted := c.validateEtcdAccepted(ps, now)

	switch {
	case c.Machine.Type == NodeWorker && pair != nil:
		ps.add("cluster.etcd.ca", "must be empty on workers: they run no etcd")

		return
	case !c.Machine.Type.IsControlPlane(), c.Cluster.Etcd.Disabled && pair == nil:
		return
	case pair == nil:
		ps.add("cluster.etcd.ca", "required on control planes, which run etcd (or set cluster.etcd.disabled)")

		return
	}

	before := len(*ps)

	checkCAPair(ps, "cluster.etcd.ca", pair, true, now)

	if len(*ps) == before && !c.Cluster.Etcd.Disabled {
		c.etcdCA, _ = ca.Parse(pair.Crt, pair.Key, now)
		c.etcdTrusted = append([]*x509.Certificate{c.etcdCA.Cert}, accepted...)
	}
}

// validateEtcdAccepted checks cluster.etcd.acceptedCAs: CA certificates
// without keys, on control planes only, each once and none the etcd CA
// itself. It returns them parsed when all are valid.
func (c *MachineConfig) validateEtcdAccepted(ps *problems, now time.Time) []*x509.Certificate {
	const path = "cluster.etcd.acceptedCAs"

	list := c.Cluster.Etcd.AcceptedCAs
	if len(list) == 0 {
		return nil
	}

	if c.Machine.Type == NodeWorker {
		ps.add(path, "must be empty on workers: they run no etcd")

		return nil
	}

	checkListLen(ps, path, len(list))

	var own *x509.Certificate
	if c.Cluster.Etcd.CA != nil {
		own, _ = ca.ParseCertificate(c.Cluster.Etcd.CA.Crt)
	}

	before := len(*ps)

	var out []*x509.Certificate

	for i, a := range list {
		p := index(path, i)
		if len(a.Key) > 0 {
			ps.add(p+".key", "accepted etcd CAs are certificates only")
		}

		checkCAPair(ps, p, &CertAndKey{Crt: a.Crt}, false, now)

		cert, err := ca.ParseCertificate(a.Crt)
		if err != nil {
			continue
		}

		switch {
		case slices.ContainsFunc(out, cert.Equal):
			ps.add(p+".crt", "listed twice")
		case own != nil && own.Equal(cert):
			ps.add(p+".crt", "is cluster.etcd.ca itself, trusted without being listed")
		}

		out = append(out, cert)
	}

	if len(*ps) > before {
		return nil
	}

	return out
}
