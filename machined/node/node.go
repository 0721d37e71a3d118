package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/health"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/timesync"
	"github.com/aegis-os/aegis/trustd"
)

// Limits of the node.
const (
	// MaxServiceLog bounds each service's log file; one older file is kept.
	MaxServiceLog = 4 << 20
	// stopTimeout bounds the stop of all services at shutdown or reboot; a
	// process gets SIGKILL after its own grace period well before that.
	stopTimeout = time.Minute
	// timeWaitReminder is how often a service waiting for time sync says
	// so again in the log: often enough that the last lines of a stuck
	// node's log name what it waits for, rare enough not to flood it.
	timeWaitReminder = time.Minute
)

// Config configures a Node. ConfigPath, Machine, State and BinDir are required.
type Config struct {
	// ConfigPath is re-read at each reboot; Machine is its validated content at start.
	ConfigPath string
	Machine    *certs.MachineConfig
	// State is the node's state directory.
	State string
	// BinDir holds the apid, trustd and etcd binaries.
	BinDir string
	// ImageDir holds the image archives of the services, for a node whose
	// config asks for the containerd runtime; empty means BinDir/images,
	// else BinDir/../lib/aegis/images where `make install` puts them.
	ImageDir string
	// MachinedLog is machined's own log, served as the "machined" log. Optional.
	MachinedLog *logs.Log
	// NodeCertTTL is the lifetime of the node's own certificates and, on a
	// control plane, of the certificates its trustd signs for workers.
	// Zero means NodeCertTTL; it must lie within trustd's bounds
	// (trustd.MinCertTTL to trustd.MaxCertTTL).
	NodeCertTTL time.Duration
	// HeartbeatInterval is how often the node refreshes its membership
	// entry. Zero means membership.DefaultInterval; it must lie within
	// [membership.MinInterval, membership.MaxInterval].
	HeartbeatInterval time.Duration
	// Logger receives machined's own records. Nil discards.
	Logger *slog.Logger
	// LogLevel is passed on to apid and trustd as --log-level, so they log
	// as machined does; zero is info.
	LogLevel slog.Level
	// Metrics receives machined's collectors: machined.sock's gRPC calls,
	// the services' states and restarts, the node's certificates. Nil
	// means no metrics. apid's and trustd's endpoints follow the machine
	// config (machine.metrics), not this field.
	Metrics prometheus.Registerer
	Clock   clock.Clock
}

// Node runs one node until it is shut down.
type Node struct {
	cfg      Config
	layout   layout.Layout
	log      *slog.Logger
	clock    clock.Clock
	bus      *events.Bus
	services *system.Manager
	store    *resources.Store
	res      *resourceapi.State // the resource API's state, set from the node's own
	logs     map[string]*logs.Log
	health   *health.Server // machined.sock's grpc.health.v1, from the machine status
	revoked  *revocation.List

	// applyMu orders ApplyConfiguration calls and trial rollbacks.
	applyMu sync.Mutex
	trial   *trial // a TRY config waiting for its rollback, under applyMu

	mu       sync.Mutex
	machine  *certs.MachineConfig // the config in effect
	etcd     *etcd.Etcd           // a control plane's etcd, made at its first boot
	booted   *bootState           // what the current boot built, for services loaded once
	ctr      *containerRuntime    // the node's containerd, with the containerd runtime
	etcdSpec *containerSpec       // etcd's container, with the containerd runtime
	stage    machine.MachineStatusEvent_MachineStage
	requests chan lifecycleRequest

	// Under mu too: what the resource API's machine status and time
	// service read.
	timeSvc   *timesync.Service // the current boot's time service
	unmet     []*machine.MachineStatusEvent_MachineStatus_UnmetCondition
	etcdCerts map[string][]byte // etcd's certificates by name, as last issued
	// etcdLoaded is the trusted etcd CAs (PEM) the running member loaded
	// at its start, nil while it does not run.
	etcdLoaded []byte

	// statusMu and certsMu make the machine status and certificate
	// resources' updates one at a time, each from the latest state.
	statusMu, certsMu sync.Mutex

	// beatMu orders the membership heartbeats and a reset's leaving: once
	// leaving is set, no heartbeat writes the entry again.
	beatMu  sync.Mutex
	leaving bool
}

type lifecycleRequest struct {
	actor    string
	shutdown bool
	reset    *resetRequest // set by Reset
}

// New prepares a node; Run starts it.
func New(cfg Config) (*Node, error) {
	if cfg.Machine == nil || cfg.State == "" || cfg.BinDir == "" {
		return nil, errors.New("node: config needs the machine config, the state directory and the binaries' directory")
	}

	if cfg.NodeCertTTL == 0 {
		cfg.NodeCertTTL = NodeCertTTL
	}

	if cfg.NodeCertTTL < trustd.MinCertTTL || cfg.NodeCertTTL > trustd.MaxCertTTL {
		return nil, fmt.Errorf("node: certificate lifetime %s outside [%s, %s]", cfg.NodeCertTTL, trustd.MinCertTTL, trustd.MaxCertTTL)
	}

	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = membership.DefaultInterval
	}

	if cfg.HeartbeatInterval < membership.MinInterval || cfg.HeartbeatInterval > membership.MaxInterval {
		return nil, fmt.Errorf("node: heartbeat interval %s outside [%s, %s]", cfg.HeartbeatInterval, membership.MinInterval, membership.MaxInterval)
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)

	res, err := resourceapi.New()
	if err != nil {
		return nil, err
	}

	bus := events.NewBus(system.DefaultBusSize, cfg.Clock)

	n := &Node{
		cfg: cfg, layout: layout.Layout{State: cfg.State}, log: cfg.Logger, clock: cfg.Clock, bus: bus,
		services: system.New(system.Config{Bus: bus, Clock: cfg.Clock, Logger: cfg.Logger}),
		store:    resources.NewStore(), logs: map[string]*logs.Log{},
		machine: cfg.Machine, requests: make(chan lifecycleRequest, 1), health: newHealth(), res: res,
	}

	if n.revoked, err = revocation.OpenList(revocation.ListConfig{Path: n.layout.RevocationList(), Clock: cfg.Clock}); err != nil {
		return nil, err
	}

	if cfg.MachinedLog != nil {
		n.logs["machined"] = cfg.MachinedLog
	}

	if err := n.registerMetrics(cfg.Metrics); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	if cfg.ImageDir == "" {
		cfg.ImageDir = defaultImageDir(cfg.BinDir)
	}

	ids := []string{"apid", "trustd"}
	if cfg.Machine.Machine.Type.IsControlPlane() {
		ids = append(ids, etcd.ServiceID)
	}

	if cfg.Machine.Machine.Runtime.Containerd() {
		rt, err := newContainerRuntime(cfg.State, cfg.ImageDir)
		if err != nil {
			return nil, err
		}

		n.ctr = rt
		ids = append(ids, ContainerdServiceID)
	}

	for _, id := range ids {
		l, err := logs.Open(n.layout.ServiceLog(id), MaxServiceLog)
		if err != nil {
			return nil, err
		}

		n.logs[id] = l
	}

	return n, nil
}

// Run serves the node's sockets and runs boot sequences (again after each
// reboot) until a shutdown is asked for or ctx ends. After a reset it wipes
// the state directory once everything is stopped and closed, and returns
// ErrRebootAfterReset if the reset asked for a reboot.
func (n *Node) Run(ctx context.Context) error {
	reset, err := n.run(ctx)
	if err != nil || reset == nil {
		return err
	}

	if err = n.wipe(); err != nil {
		return err
	}

	if reset.reboot {
		return ErrRebootAfterReset
	}

	return nil
}

func (n *Node) run(ctx context.Context) (*resetRequest, error) {
	defer n.closeLogs()

	if n.ctr != nil {
		defer n.ctr.close()
	}

	sockets, err := n.listen()
	if err != nil {
		return nil, err
	}
	defer sockets.stop()

	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()

	n.followResources(followCtx)

	actor := ""

	for {
		req, done := n.runBoot(ctx, actor)

		n.stopServices(req)

		if done {
			n.log.Info("node stopped")

			return req.reset, nil
		}

		actor = req.actor
	}
}

// runBoot runs one boot and everything it starts until a lifecycle request
// or the end of ctx; it reports the request and whether machined should end.
func (n *Node) runBoot(ctx context.Context, actor string) (lifecycleRequest, bool) {
	bootCtx, cancel := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() { n.boot(bootCtx, actor, &wg) })

	var (
		req  lifecycleRequest
		done bool
	)

	select {
	case req = <-n.requests:
		done = req.shutdown

		// A reset leaves the cluster while etcd and the heartbeats still
		// run; if it cannot, the node boots again unchanged.
		if req.reset != nil && !n.leave(ctx, req) {
			req, done = lifecycleRequest{actor: req.actor}, false
		}
	case <-ctx.Done():
		done = true
	}

	cancel()
	wg.Wait()

	return req, done
}

func (n *Node) stopServices(req lifecycleRequest) {
	switch {
	case req.reset != nil: // stays RESETTING
	case req.shutdown:
		n.machineStatus(machine.MachineStatusEvent_SHUTTING_DOWN, "")
	default:
		n.machineStatus(machine.MachineStatusEvent_REBOOTING, "")
	}

	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()

	if err := n.services.Stop(ctx); err != nil {
		n.log.Error("stopping services", slog.String(logkey.Error, err.Error()))
	}
}

// Reboot asks the node to stop its services and boot again.
func (n *Node) Reboot(actor string) { n.request(lifecycleRequest{actor: actor}) }

// Shutdown asks the node to stop its services and machined to end.
func (n *Node) Shutdown(actor string) { n.request(lifecycleRequest{actor: actor, shutdown: true}) }

func (n *Node) request(r lifecycleRequest) {
	select {
	case n.requests <- r:
	default: // one is already pending; it wins
	}
}

// ServiceLog finds the log of a service, or of machined itself.
func (n *Node) ServiceLog(id string) (*logs.Log, bool) {
	l, ok := n.logs[id]

	return l, ok
}

// machineStatus publishes the machine's stage and, with reason set, that
// it waits for time sync (the one condition a boot reports as unmet).
func (n *Node) machineStatus(stage machine.MachineStatusEvent_MachineStage, actor string, unmet ...*machine.MachineStatusEvent_MachineStatus_UnmetCondition) {
	n.mu.Lock()
	n.stage, n.unmet = stage, unmet
	n.mu.Unlock()

	ready := stage == machine.MachineStatusEvent_RUNNING && len(unmet) == 0
	setHealth(n.health, ready)
	n.refreshMachineStatus()

	n.bus.Publish(&machine.MachineStatusEvent{Stage: stage, Status: &machine.MachineStatusEvent_MachineStatus{
		Ready: ready, UnmetConditions: unmet,
	}}, actor)
}

// unmetTime reports the wait for time sync (reason set) or its end.
func (n *Node) unmetTime(reason string) {
	n.mu.Lock()
	stage := n.stage
	n.mu.Unlock()

	var unmet []*machine.MachineStatusEvent_MachineStatus_UnmetCondition
	if reason != "" {
		unmet = append(unmet, &machine.MachineStatusEvent_MachineStatus_UnmetCondition{Name: "time", Reason: reason})
	}

	n.machineStatus(stage, "", unmet...)
}

func (n *Node) currentBoot() *bootState {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.booted
}

// bootConfig is the machine config the current boot read: what its
// services start with.
func (n *Node) bootConfig() *certs.MachineConfig {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.booted != nil && n.booted.cfg != nil {
		return n.booted.cfg
	}

	return n.machine
}

func (n *Node) current() *certs.MachineConfig {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.machine
}

func (n *Node) closeLogs() {
	for id, l := range n.logs {
		if id != "machined" {
			l.Close() //nolint:errcheck // the node is going away
		}
	}
}

// hostname is the config's hostname, else the host's, in canonical form
// (ca.CanonicalName): the node's name as its certificate proves it and its
// member entry records it.
func hostname(cfg *certs.MachineConfig) string {
	if cfg.Machine.Hostname != "" {
		return ca.CanonicalName(cfg.Machine.Hostname)
	}

	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}

	return ca.CanonicalName(h)
}

// addresses are the node's addresses: its listen address, else every
// global unicast address of the host.
func addresses(cfg *certs.MachineConfig) ([]string, error) {
	if a := cfg.Machine.ListenAddress; a != "" {
		if addr, err := netip.ParseAddr(a); err == nil && !addr.IsUnspecified() {
			return []string{addr.String()}, nil
		}
	}

	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("node: listing addresses: %w", err)
	}

	var out []string

	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().IsGlobalUnicast() {
			out = append(out, p.Addr().String())
		}
	}

	return out, nil
}

// binary is the path of one of the node's service binaries.
func (n *Node) binary(name string) string { return filepath.Join(n.cfg.BinDir, name) }

// defaultImageDir is BinDir/images, as make build writes it, unless only
// an installed tree's BinDir/../lib/aegis/images exists.
func defaultImageDir(binDir string) string {
	dir := filepath.Join(binDir, "images")
	if _, err := os.Stat(dir); err == nil {
		return dir
	}

	installed := filepath.Join(filepath.Dir(filepath.Clean(binDir)), "lib", "aegis", "images")
	if _, err := os.Stat(installed); err == nil {
		return installed
	}

	return dir
}
