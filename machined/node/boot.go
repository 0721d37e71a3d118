package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/timesync"
)

// bootState is what one boot builds, handed from phase to phase.
type bootState struct {
	cfg       *certs.MachineConfig
	hostname  string
	addresses []string
	time      *timesync.Service
	certs     *certController
	// etcdIssued is closed once this boot has issued etcd's certificates.
	etcdIssued <-chan struct{}
	// trustd is a worker's client of the control planes' trustd; guarded
	// by configState.mu, since a reset reads it from outside the boot.
	trustd *trustdclient.Client
}

type phase struct {
	name string
	run  func(ctx context.Context, b *bootState, bg *sync.WaitGroup) error
}

// boot runs the boot sequence: config, time service, held node
// certificates, services, ready. Each phase is an event; a phase that fails
// ends the sequence and leaves machined up, reporting why. Loops the boot
// starts (time sync) run on bg until ctx ends.
//
// Nothing waits for the clock before the services start: a node that holds
// usable certificates serves its API at once, also while its NTP servers
// are down, and what needs a synced clock (issuing and renewing node
// certificates; trustd's signing, gated inside trustd) waits visibly: the
// certificates service in state Waiting, the machine status with an unmet
// "time" condition, the services phase open until the node is ready.
func (n *Node) boot(ctx context.Context, actor string, bg *sync.WaitGroup) {
	n.bus.Publish(&machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_START}, actor)
	n.machineStatus(machine.MachineStatusEvent_BOOTING, actor)

	b := &bootState{}
	n.config.startBoot(b)

	for _, p := range []phase{
		{"config", n.phaseConfig},
		{"time", n.phaseTime},
		{"certificates", n.phaseCertificates},
		{"runtime", n.phaseRuntime},
		{"services", n.phaseServices},
	} {
		n.bus.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_START}, actor)
		n.log.Info("boot phase", slog.String(logkey.Phase, p.name))

		err := p.run(ctx, b, bg)

		n.bus.Publish(&machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_STOP}, actor)

		if err != nil {
			if ctx.Err() == nil {
				n.log.Error("boot failed", slog.String(logkey.Phase, p.name), slog.String(logkey.Error, err.Error()))
			}

			n.bus.Publish(&machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP, Error: &common.Error{
				Code: common.Code_FATAL, Message: fmt.Sprintf("phase %s: %v", p.name, err),
			}}, actor)

			return
		}
	}

	n.bus.Publish(&machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP}, actor)
	n.machineStatus(machine.MachineStatusEvent_RUNNING, actor)
	n.log.Info("node ready")
}

// phaseConfig loads the machine config (again after a reboot: it may have
// been edited) and publishes what it says about the node.
func (n *Node) phaseConfig(_ context.Context, b *bootState, _ *sync.WaitGroup) error {
	cfg := n.config.current()

	if n.services.Loaded() {
		reloaded, err := certs.LoadMachineConfig(n.cfg.ConfigPath, n.clock.Now())
		if err != nil {
			return err
		}

		if reloaded.Machine.Type.IsControlPlane() != cfg.Machine.Type.IsControlPlane() {
			return errors.New("the node type changed between control plane and worker; restart machined to apply it")
		}

		cfg = reloaded
		n.config.set(cfg)
	}

	addrs, err := addresses(cfg)
	if err != nil {
		return err
	}

	b.cfg, b.hostname, b.addresses = cfg, hostname(cfg), addrs
	n.setMachineConfig(cfg)

	n.store.Update(func(r *node.Resources) {
		r.Hostname, r.Addresses, r.Role = b.hostname, addrs, roleOf(cfg)
		r.AcceptedCas = cfg.AcceptedCAs().PEM()
		r.TrustdToken, r.OsCa, r.ControlPlaneHosts, r.WorkerSans = "", nil, nil, nil
		r.PreviousTrustdTokens = nil

		if osCA := cfg.OSCA(); osCA != nil {
			r.TrustdToken, r.PreviousTrustdTokens = cfg.Machine.Token, previousTokens(cfg)
			r.ControlPlaneHosts = slices.Clone(cfg.Cluster.ControlPlane.Endpoints)
			r.WorkerSans = slices.Clone(cfg.Cluster.WorkerSANs)
			r.OsCa = &node.KeyPair{Crt: osCA.CertPEM, Key: osCA.KeyPEM}
		}
	})

	return nil
}

// phaseTime starts the time service; its status follows into trustd's
// gate. It does not wait for the sync: the services that need it do (see
// boot).
func (n *Node) phaseTime(ctx context.Context, b *bootState, bg *sync.WaitGroup) error {
	svc, err := timesync.New(timesync.Config{
		Servers: b.cfg.Machine.Time.Servers, TrustHostClock: b.cfg.Machine.Time.TrustHostClock,
		MaxOffset: b.cfg.MaxTimeOffset(), PollInterval: b.cfg.Machine.Time.PollInterval, Logger: n.log, Clock: n.clock,
	})
	if err != nil {
		return err
	}

	n.config.setTime(b, svc)
	// Before anything starts: a reboot must not leave the last boot's
	// "synced" in trustd's view.
	n.publishTime(svc)

	bg.Go(func() { _ = svc.Run(ctx) })
	bg.Go(func() { n.followTime(ctx, svc) })

	return nil
}

// followTime publishes every change of the time gate, and every
// measurement to the resource API.
func (n *Node) followTime(ctx context.Context, svc *timesync.Service) {
	for {
		changed, measured := svc.Changed(), svc.Measured()
		n.publishTime(svc)
		n.setTime(svc)

		select {
		case <-changed:
		case <-measured:
		case <-ctx.Done():
			return
		}
	}
}

// publishTime puts the time service's status in the resources store, where
// trustd's gate reads it.
func (n *Node) publishTime(svc *timesync.Service) {
	st := svc.Status()

	msg := "synced"

	switch {
	case svc.Synced():
	case st.LastError != nil:
		msg = st.LastError.Error()
	default:
		msg = "waiting for the first reply of an NTP server"
	}

	n.store.Update(func(r *node.Resources) { r.Time = &node.TimeStatus{Synced: svc.Synced(), Message: msg} })
}

// phaseCertificates puts the certificates the node kept from an earlier
// boot back in use, if they are still usable; the certificates service
// obtains the others and renews them all.
func (n *Node) phaseCertificates(ctx context.Context, b *bootState, bg *sync.WaitGroup) error {
	certs := &certController{
		cfg: b.cfg, current: n.config.current, store: n.store, layout: n.layout, hostname: b.hostname, addresses: b.addresses,
		hosts: ca.ServerHosts(b.hostname, b.addresses, b.cfg.Machine.CertSANs), ttl: n.cfg.NodeCertTTL,
		clock: n.clock, log: n.log,
	}

	n.config.setCertController(b, certs)

	b.certs.loadHeld()

	if err := n.setUpEtcd(ctx, b, bg); err != nil {
		return err
	}

	n.followRevocations(ctx, b, bg)

	return nil
}

// phaseRuntime checks, for a node whose config asks for containers, that
// the machine can run them and that the image archives are whole: the boot
// fails here, saying what is missing, rather than a service later.
func (n *Node) phaseRuntime(_ context.Context, b *bootState, _ *sync.WaitGroup) error {
	if n.ctr == nil {
		return nil
	}

	ids := []string{"apid"}
	if b.cfg.Machine.Type.IsControlPlane() {
		ids = append(ids, "trustd")
	}

	if b.cfg.Machine.Type.IsControlPlane() && b.cfg.EtcdCA() != nil {
		ids = append(ids, "etcd")
	}

	return n.ctr.prepare(ids)
}

// phaseServices starts apid everywhere, trustd on control planes and the
// certificates service, and waits until they are up: with a synced clock
// only, since trustd is healthy and the certificates service runs only then.
func (n *Node) phaseServices(ctx context.Context, b *bootState, bg *sync.WaitGroup) error {
	if !n.services.Loaded() {
		if err := n.services.Load(n.serviceDefinitions(b)...); err != nil {
			return err
		}
	}

	if err := n.services.Start(); err != nil {
		return err
	}

	// etcd waits for a bootstrap or a cluster to join, which may come long
	// after the boot: the node is ready without it, as in Talos.
	var ids []string

	for _, info := range n.services.List() {
		if info.ID != etcd.ServiceID {
			ids = append(ids, info.ID)
		}
	}

	if err := n.services.WaitUp(ctx, ids...); err != nil {
		return err
	}

	// The heartbeats start once the node has its certificate, which they
	// present; a worker is a listed member by the time it is ready. A
	// connection to trustd that failed before, for want of it, is tried
	// again at once.
	if tc := n.config.trustd(b); tc != nil {
		tc.Retry()
	}

	n.beats.start(ctx, b, bg)

	return ctx.Err()
}

// nodeNameArgs are apid's --node-name flags: the control-plane
// endpoints, names and addresses, which apid routes to as control planes
// besides the live members; apid refuses any other node in routing
// metadata.
func nodeNameArgs(cfg *certs.MachineConfig) []string {
	var args []string

	for _, ep := range cfg.Cluster.ControlPlane.Endpoints {
		host := ep
		if h, _, err := net.SplitHostPort(ep); err == nil {
			host = h
		}

		args = append(args, "--node-name", host)
	}

	return args
}

// roleOf is the node's role as membership entries and apid spell it.
func roleOf(cfg *certs.MachineConfig) string {
	if cfg.Machine.Type.IsControlPlane() {
		return membership.RoleControlPlane
	}

	return membership.RoleWorker
}

// metricsArgs is the --metrics-listen flag of apid or trustd when the
// machine config turns metrics on (machine.metrics), else nothing.
func metricsArgs(cfg *certs.MachineConfig, daemon string) []string {
	if addr := cfg.MetricsListen(daemon); addr != "" {
		return []string{"--metrics-listen", addr}
	}

	return nil
}
