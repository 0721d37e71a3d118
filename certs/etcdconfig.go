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
	// etcd's server, peer and client certificates from. Required on control
	// planes unless Disabled; workers carry none.
	CA *CertAndKey `yaml:"ca,omitempty"`
	// Disabled makes a control plane that runs no etcd: a test-only node
	// beside a cluster, which must never become one of its members.
	Disabled bool `yaml:"disabled,omitempty"`
}

// EtcdCA returns the etcd CA with its key on a control plane that runs
// etcd, nil otherwise.
func (c *MachineConfig) EtcdCA() *ca.CA { return c.etcdCA }

// validateEtcd checks the etcd section: only control planes carry the CA,
// always with its key.
func (c *MachineConfig) validateEtcd(ps *problems, now time.Time) {
	pair := c.Cluster.Etcd.CA

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
	}
}
