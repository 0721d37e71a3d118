package certs

import (
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
	// etcd's server, peer and client certificates from. Workers carry none.
	// A control plane without it runs no etcd.
	CA *CertAndKey `yaml:"ca,omitempty"`
}

// EtcdCA returns the etcd CA with its key on a control plane whose config
// carries one, nil otherwise.
func (c *MachineConfig) EtcdCA() *ca.CA { return c.etcdCA }

// validateEtcd checks the etcd section: only control planes carry the CA,
// always with its key.
func (c *MachineConfig) validateEtcd(ps *problems, now time.Time) {
	pair := c.Cluster.Etcd.CA
	if pair == nil {
		return
	}

	if !c.Machine.Type.IsControlPlane() {
		ps.add("cluster.etcd.ca", "must be empty on workers: they run no etcd")

		return
	}

	before := len(*ps)

	checkCAPair(ps, "cluster.etcd.ca", pair, true, now)

	if len(*ps) == before {
		c.etcdCA, _ = ca.Parse(pair.Crt, pair.Key, now)
	}
}
