package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/health"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// setUpEtcd makes the node's etcd at its first boot (a control plane whose
// config holds the etcd CA) and, at every boot, once the clock is synced,
// issues its certificates and starts their renewal: the boot does not wait
// for the clock (see boot), and a certificate dated by an unsynced clock
// could be valid when it should not be. The service itself is loaded with
// the others and waits for both (etcdService).
func (n *Node) setUpEtcd(ctx context.Context, b *bootState, bg *sync.WaitGroup) error {
	if !b.cfg.Machine.Type.IsControlPlane() || b.cfg.EtcdCA() == nil {
		return nil
	}

	e := n.etcd.member()
	if e == nil {
		var err error
		if e, err = n.newEtcd(b); err != nil {
			return err
		}
	}

	e.NewBoot()

	// A config applied with a reboot may have changed the etcd CAs.
	if err := e.SetCAs(b.cfg.EtcdCA(), b.cfg.EtcdTrustedCAs()[1:]); err != nil {
		return err
	}

	issued := make(chan struct{})
	b.etcdIssued = issued

	bg.Go(func() { n.issueEtcdCertificates(ctx, b, e, issued, bg) })
	bg.Go(func() { <-ctx.Done(); e.Close() })

	return nil
}

// newEtcd makes the node's etcd, as a container with the containerd
// runtime, and keeps it for the boots to come.
func (n *Node) newEtcd(b *bootState) (*etcd.Etcd, error) {
	if len(b.addresses) == 0 {
		return nil, fmt.Errorf("etcd: the node has no address to serve etcd on")
	}

	ecfg := etcd.Config{
		Name: b.hostname, Address: b.addresses[0], Endpoints: b.cfg.Cluster.ControlPlane.Endpoints,
		Dir: n.layout.EtcdDir(), Binary: n.binary("etcd"), Log: n.logs[etcd.ServiceID],
		TextLogs: n.cfg.LogFormat == daemonflag.FormatText, CA: b.cfg.EtcdCA(), Accepted: b.cfg.EtcdTrustedCAs()[1:],
		Hosts:   ca.ServerHosts(b.hostname, b.addresses, b.cfg.Machine.CertSANs),
		CertTTL: n.cfg.NodeCertTTL, ClusterToken: b.cfg.Cluster.Name, Logger: n.log, Clock: n.clock,
		OnIssue: n.certRes.etcdIssued, OnTrust: n.certRes.etcdTrustLoaded,
	}

	var spec *containerSpec
	if n.ctr != nil {
		spec = n.confineEtcd()
		ecfg.ShareFiles, ecfg.Runner = n.shareEtcdFiles, n.etcdRunner(spec)
	}

	e, err := etcd.New(ecfg)
	if err != nil {
		return nil, err
	}

	n.etcd.set(e, spec)

	return e, nil
}

// issueEtcdCertificates issues etcd's certificates once the clock is
// synced, closes issued, and runs their renewal on bg until ctx ends.
func (n *Node) issueEtcdCertificates(ctx context.Context, b *bootState, e *etcd.Etcd, issued chan<- struct{}, bg *sync.WaitGroup) {
	if n.timeCondition(b, "issuing etcd certificates").Wait(ctx) != nil {
		return
	}

	loops, err := e.IssueCertificates()
	if err != nil {
		n.log.Error("etcd certificates not issued; etcd waits for them", slog.String(logkey.Error, err.Error()))

		return
	}

	close(issued)

	for _, loop := range loops {
		bg.Go(func() { _ = loop(ctx) })
	}
}

// Etcd is the MachineService's view of the node's etcd.
func (n *Node) Etcd() (machineapi.Etcd, error) {
	if e := n.etcd.member(); e != nil {
		return etcdAPI{e, n}, nil
	}

	if cfg := n.config.current(); cfg.Machine.Type.IsControlPlane() && cfg.EtcdCA() != nil {
		return nil, etcd.ErrNotRunning
	}

	return nil, etcd.ErrNotControlPlane
}

// etcdAPI adds the node's service control to the etcd operations.
type etcdAPI struct {
	*etcd.Etcd
	n *Node
}

func (a etcdAPI) Leave(ctx context.Context) error { return a.Etcd.Leave(ctx, a.n.services) }

var _ machineapi.Etcd = etcdAPI{}

// etcdService is etcd's service with the condition of the current boot:
// time synced and its certificates issued.
type etcdService struct {
	system.Service
	n *Node
}

func (s etcdService) Condition() system.Condition {
	b := s.n.config.boot()

	return etcdReady{time: s.n.timeCondition(b, "starting etcd"), issued: b.etcdIssued}
}

// DependsOn waits for the node's containerd when etcd runs as a container.
func (s etcdService) DependsOn() []string {
	if s.n.etcd.container() != nil {
		return []string{ContainerdServiceID}
	}

	return s.Service.DependsOn()
}

// PreStart imports etcd's image when it runs as a container.
func (s etcdService) PreStart(ctx context.Context) error {
	spec := s.n.etcd.container()
	if spec == nil {
		return nil
	}

	return spec.prepare(ctx)
}

func (s etcdService) HealthCheck() (health.Check, health.Settings) {
	return s.Service.(system.HealthChecker).HealthCheck()
}

func (s etcdService) AllowAPI(a system.Action) error {
	return s.Service.(system.APIControlled).AllowAPI(a)
}

// etcdReady holds once the clock is synced and the boot has issued etcd's
// certificates.
type etcdReady struct {
	time   *timeSynced
	issued <-chan struct{}
}

func (c etcdReady) String() string { return c.time.String() + " and etcd certificates" }

func (c etcdReady) Wait(ctx context.Context) error {
	if err := c.time.Wait(ctx); err != nil {
		return err
	}

	select {
	case <-c.issued:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// client is the client of the node's etcd for a store of the cluster's
// state: noEtcd when the node runs no etcd, unavailable (wrapping the
// cause) when its client cannot be had.
func (s *etcdState) client(noEtcd, unavailable error) (*clientv3.Client, error) {
	e := s.member()
	if e == nil {
		return nil, noEtcd
	}

	cli, err := e.Client()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", unavailable, err)
	}

	return cli, nil
}
