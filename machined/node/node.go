package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/machined/upgrade"
	"github.com/aegis-os/aegis/trustd"
)

// Limits of the node.
const (
	// MaxServiceLog bounds each service's log file; one older file is kept.
	MaxServiceLog = 4 << 20
	// stopTimeout bounds the stop of all services at shutdown or reboot; a
	// process gets SIGKILL after its own grace period well before that.
	stopTimeout = time.Minute
	// stopNotice is how long a node asked to reboot, shut down or reset
	// over the API goes on serving, its new status published, before it
	// stops its services. Talos clients open their follow of the node's
	// events beside the call (talosctl's reboot, shutdown and reset
	// --wait, with a tail of 0), and a follow that opens after
	// stopAllServices went out never sees it: the client then waits for
	// the event until its timeout, the node's API gone. Half a second is
	// many times the round of a call through two apids on a loaded
	// machine, and what a Talos node spends on its own tasks before it
	// stops its services.
	stopNotice = 500 * time.Millisecond
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
	// LogFormat is passed on to apid and trustd as --log-format; zero is
	// json.
	LogFormat daemonflag.LogFormat
	// Metrics receives machined's collectors: machined.sock's gRPC calls,
	// the services' states and restarts, the node's certificates. Nil
	// means no metrics. apid's and trustd's endpoints follow the machine
	// config (machine.metrics), not this field.
	Metrics prometheus.Registerer
	// Slot is the installed version this machined runs, as cmd/machined
	// chose it from the node's slots (machined/upgrade); its zero value
	// is the version installed at BinDir, never upgraded.
	Slot upgrade.Slot
	// StartDecision is what cmd/machined decided on the slots at this
	// start; the node publishes a rollback it made.
	StartDecision upgrade.Decision
	// Listeners holds the listening sockets of apid and trustd with the
	// process runtime (see servicedefs.go): machined keeps them open
	// across the services' restarts and reboots, and Run closes them when
	// it ends, unless it returns ErrSwitchVersion: cmd/machined then passes
	// them on to the version it executes. Nil means a new, empty set.
	Listeners *inherit.Set
	Clock     clock.Clock
	// Rand makes the node's boot IDs. Nil means crypto/rand.
	Rand io.Reader
}

// Node runs one node until it is shut down. Each concern owns its state
// and its lock: the config in effect and the current boot (config), the
// machine status (status), the node's etcd (etcd), the heartbeats and the
// member entry (beats), the pending TRY config (trials), the certificate
// resources (certRes) and the revocation list (revoked, locked inside
// revocation.List). Locks are taken in this order: trials.mu (held
// through an apply or a rollback), beats.mu (held through a heartbeat),
// certRes.mu and status.mu (each held through one resource update), then
// config.mu and etcd.mu, held only to read or set their own fields.
type Node struct {
	cfg    Config
	layout layout.Layout
	deps

	logs    map[string]*logs.Log
	revoked revocations
	ctr     *containerRuntime // the node's containerd, with the containerd runtime

	config   configState
	status   machineState
	etcd     etcdState
	beats    heartbeats
	trials   trials
	upgrades upgrades
	certRes  certResources
	bootID   bootID
	requests chan lifecycleRequest
	// ending is closed when machined begins to end (a shutdown, a version
	// switch): what waits for a service of this machined's stops waiting.
	ending    chan struct{}
	endingNow sync.Once
	// clientCerts counts the client certificates the node issues; nil
	// without metrics.
	clientCerts *metrics.ClientCertificateCounter
}

// deps are what the node's parts share, set once by New.
type deps struct {
	log      *slog.Logger
	clock    clock.Clock
	bus      *events.Bus
	services *system.Manager
	store    *resources.Store
	members  *resources.Members // the member list apid routes by, a control plane's
	res      *resourceapi.State // the resource API's state, set from the node's own
}

// New prepares a node; Run starts it.
func New(cfg Config) (*Node, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}

	res, err := resourceapi.New()
	if err != nil {
		return nil, err
	}

	bus := events.NewBus(system.DefaultBusSize, cfg.Clock)

	d := deps{
		log: cfg.Logger, clock: cfg.Clock, bus: bus, res: res, store: resources.NewStore(), members: resources.NewMembers(),
		services: system.New(system.Config{Bus: bus, Clock: cfg.Clock, Logger: cfg.Logger}),
	}
	n := &Node{
		cfg: cfg, layout: layout.Layout{State: cfg.State}, deps: d, logs: map[string]*logs.Log{},
		config: configState{machine: cfg.Machine}, status: newMachineState(d),
		trials: newTrials(), requests: make(chan lifecycleRequest, 1), ending: make(chan struct{}),
	}
	n.beats = heartbeats{deps: d, interval: cfg.HeartbeatInterval, etcd: &n.etcd, config: &n.config, list: membership.NewCopy()}
	n.certRes = certResources{deps: d, config: &n.config, etcd: &n.etcd}

	list, err := revocation.OpenList(revocation.ListConfig{Path: n.layout.RevocationList(), Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}

	n.revoked = revocations{deps: d, list: list, etcd: &n.etcd}

	if cfg.MachinedLog != nil {
		n.logs["machined"] = cfg.MachinedLog
	}

	if err := n.registerMetrics(cfg.Metrics); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	if err := n.openServices(); err != nil {
		return nil, err
	}

	return n, nil
}

// withDefaults checks cfg and fills in its defaults.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Machine == nil || cfg.State == "" || cfg.BinDir == "" {
		return cfg, errors.New("node: config needs the machine config, the state directory and the binaries' directory")
	}

	if cfg.NodeCertTTL == 0 {
		cfg.NodeCertTTL = NodeCertTTL
	}

	if cfg.NodeCertTTL < trustd.MinCertTTL || cfg.NodeCertTTL > trustd.MaxCertTTL {
		return cfg, fmt.Errorf("node: certificate lifetime %s outside [%s, %s]", cfg.NodeCertTTL, trustd.MinCertTTL, trustd.MaxCertTTL)
	}

	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = membership.DefaultInterval
	}

	if cfg.HeartbeatInterval < membership.MinInterval || cfg.HeartbeatInterval > membership.MaxInterval {
		return cfg, fmt.Errorf("node: heartbeat interval %s outside [%s, %s]", cfg.HeartbeatInterval, membership.MinInterval, membership.MaxInterval)
	}

	if cfg.ImageDir == "" {
		cfg.ImageDir = defaultImageDir(cfg.BinDir)
	}

	if cfg.Listeners == nil {
		cfg.Listeners = &inherit.Set{}
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Rand = defaults.Rand(cfg.Rand)

	return cfg, nil
}

// openServices opens the services' logs and, for a node whose config asks
// for containers, prepares its containerd.
func (n *Node) openServices() error {
	ids := []string{"apid", "trustd"}
	if n.cfg.Machine.Machine.Type.IsControlPlane() {
		ids = append(ids, etcd.ServiceID)
	}

	if n.cfg.Machine.Machine.Runtime.Containerd() {
		rt, err := newContainerRuntime(n.cfg.State, n.cfg.ImageDir)
		if err != nil {
			return err
		}

		n.ctr = rt
		ids = append(ids, ContainerdServiceID)
	}

	for _, id := range ids {
		l, err := logs.Open(n.layout.ServiceLog(id), MaxServiceLog)
		if err != nil {
			return err
		}

		n.logs[id] = l
	}

	return nil
}

// ServiceLog finds the log of a service, or of machined itself. The
// certificates service runs inside machined and writes to machined's log,
// so that is its log: every service ServiceList names has one, as Talos
// clients expect (Talos's LogsSuite reads the log of each).
func (n *Node) ServiceLog(id string) (*logs.Log, bool) {
	if id == CertificatesService {
		id = "machined"
	}

	l, ok := n.logs[id]

	return l, ok
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
