package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/machineapi"
)

// setUpEtcd makes the node's etcd at its first boot (a control plane whose
// config holds the etcd CA), issues its certificates at every boot and
// starts their renewal. The service itself is loaded with the others.
func (n *Node) setUpEtcd(ctx context.Context, b *bootState, bg *sync.WaitGroup) error {
	if !b.cfg.Machine.Type.IsControlPlane() || b.cfg.EtcdCA() == nil {
		return nil
	}

	n.mu.Lock()
	e := n.etcd
	n.mu.Unlock()

	if e == nil {
		if len(b.addresses) == 0 {
			return fmt.Errorf("etcd: the node has no address to serve etcd on")
		}

		var err error

		e, err = etcd.New(etcd.Config{
			Name: b.hostname, Address: b.addresses[0], Endpoints: b.cfg.Cluster.ControlPlane.Endpoints,
			Dir: n.layout.EtcdDir(), Binary: n.binary("etcd"), Log: n.logs[etcd.ServiceID],
			CA: b.cfg.EtcdCA(), Hosts: serverHosts(b.hostname, b.addresses, b.cfg.Machine.CertSANs),
			CertTTL: n.cfg.NodeCertTTL, ClusterToken: b.cfg.Cluster.Name, Logger: n.log, Clock: n.clock,
		})
		if err != nil {
			return err
		}

		n.mu.Lock()
		n.etcd = e
		n.mu.Unlock()
	}

	e.NewBoot()

	loops, err := e.IssueCertificates()
	if err != nil {
		return err
	}

	for _, loop := range loops {
		bg.Go(func() { _ = loop(ctx) })
	}

	bg.Go(func() { <-ctx.Done(); e.Close() })

	return nil
}

// Etcd is the MachineService's view of the node's etcd.
func (n *Node) Etcd() (machineapi.Etcd, error) {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.etcd == nil {
		if n.machine.Machine.Type.IsControlPlane() && n.machine.EtcdCA() != nil {
			return nil, etcd.ErrNotRunning
		}

		return nil, etcd.ErrNotControlPlane
	}

	return etcdAPI{n.etcd, n}, nil
}

// etcdAPI adds the node's service control to the etcd operations.
type etcdAPI struct {
	*etcd.Etcd
	n *Node
}

func (a etcdAPI) Leave(ctx context.Context) error { return a.Etcd.Leave(ctx, a.n.services) }

var _ machineapi.Etcd = etcdAPI{}
