// Package etcd runs the real etcd server on a control plane and manages the
// cluster it belongs to, as Talos does: its certificates from the etcd CA, a
// one-member cluster formed by Bootstrap, other control planes joining as
// learners and promoted once caught up, and the operations of the Talos
// API's Etcd* methods.
package etcd

import (
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// ServiceID is the etcd service's ID.
const ServiceID = "etcd"

// Config configures an Etcd. Every field but Logger and Clock is required.
type Config struct {
	// Name is the member's name, the node's hostname.
	Name string
	// Address is the node's address: etcd serves clients on Address:2379 and
	// peers on Address:2380, and advertises both.
	Address string
	// Endpoints are the control-plane endpoints of the node's config (host or
	// host:port); a control plane without data looks for a cluster on
	// their etcd client port.
	Endpoints []string
	// Dir is the node's etcd folder: data, certificates and member ID.
	Dir string
	// Binary is the etcd server's executable.
	Binary string
	// Log receives the server's output.
	Log *logs.Log
	// TextLogs has the server write etcd's console lines instead of its
	// JSON (machined's --log-format text); false is JSON.
	TextLogs bool
	// CA is the etcd CA with its key; SetCAs changes it.
	CA *ca.CA
	// Accepted are etcd CAs trusted besides CA (an etcd CA rotation's
	// overlap); SetCAs changes them. Nil trusts CA alone.
	Accepted []*x509.Certificate
	// Hosts are the SANs of etcd's server and peer certificates; the peer
	// certificate adds PeerName.
	Hosts []string
	// CertTTL is the lifetime of etcd's certificates, renewed at half-life.
	CertTTL time.Duration
	// ClusterToken tells this cluster's members from another's.
	ClusterToken string
	// ShareFiles, if set, is called after each write of the certificates
	// and once the member runs: it gives the files of Dir to the users of
	// the services that run as containers (etcd's own, trustd's client
	// certificate), which root-owned new files would shut out.
	ShareFiles func() error
	// Runner, if set, makes the runner of each start of the server (a
	// container); nil runs it as a process.
	Runner func(runner.ProcessConfig) runner.Runner
	Logger *slog.Logger
	Clock  clock.Clock

	// OnIssue is told of each certificate the member is issued ("server",
	// "peer", "client"), never its key; nil tells nobody.
	OnIssue func(name string, certPEM []byte)
	// OnTrust is told of the etcd CAs (PEM) the member loaded at each of
	// its starts, and of nil when it ends; nil tells nobody.
	OnTrust func(trustedPEM []byte)
}

// Etcd is the etcd of one control plane, made at its first boot; NewBoot
// starts each boot afresh.
type Etcd struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	bootstrap *bootstrapRequest // set by Bootstrap, taken by the runner
	wake      chan struct{}     // closed when bootstrap is set
	client    *clientv3.Client  // to the local member, made on first use
	cluster   *clientv3.Client  // to every control plane, made on first use

	// pkiMu orders the writes of the member's PKI files (SetCAs, the
	// first issue, renewals) and the reads of the trusted CAs at a start.
	pkiMu  sync.Mutex
	issued bool // the member's certificates have been written this run of machined
}

// bootstrapRequest is a Bootstrap waiting for the runner: a new cluster,
// from a snapshot when snapshot is set.
type bootstrapRequest struct {
	snapshot string
}

// Errors the API maps to its codes.
var (
	// ErrBootstrapped: the cluster exists already, or this member has data.
	ErrBootstrapped = errors.New("etcd: the cluster is already bootstrapped")
	// ErrNotRunning: the local member does not serve (yet).
	ErrNotRunning = errors.New("etcd: the local member is not running")
	// ErrQuorum: the change would leave the cluster without quorum.
	ErrQuorum = errors.New("etcd: the change would break quorum")
	// ErrMemberNotFound: no member has the ID.
	ErrMemberNotFound = errors.New("etcd: no member with this ID")
	// ErrBadSnapshot: the snapshot is truncated or not an etcd snapshot.
	ErrBadSnapshot = errors.New("etcd: not a valid snapshot")
	// ErrNoSnapshot: Bootstrap with recover, but no snapshot was uploaded.
	ErrNoSnapshot = errors.New("etcd: no snapshot uploaded: call EtcdRecover first")
)

// New returns an Etcd; nothing runs until its service starts.
func New(cfg Config) (*Etcd, error) {
	switch {
	case cfg.Name == "", cfg.Address == "", cfg.Dir == "", cfg.Binary == "", cfg.CA == nil:
		return nil, errors.New("etcd: config needs the name, address, folder, binary and CA")
	}

	if _, err := netip.ParseAddr(cfg.Address); err != nil {
		return nil, errors.New("etcd: the address must be an IP address")
	}

	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Clock = defaults.Clock(cfg.Clock)

	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "aegis"
	}

	return &Etcd{cfg: cfg, log: cfg.Logger.With(slog.String(logkey.ServiceID, ServiceID)), wake: make(chan struct{})}, nil
}

// Close releases the clients of the local member and of the cluster.
func (e *Etcd) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()

	if e.cluster != nil {
		e.cluster.Close() //nolint:errcheck // closing
		e.cluster = nil
	}

	if e.client != nil {
		e.client.Close() //nolint:errcheck // closing
		e.client = nil
	}
}

func (e *Etcd) dataDir() string    { return filepath.Join(e.cfg.Dir, "data") }
func (e *Etcd) pkiDir() string     { return filepath.Join(e.cfg.Dir, "pki") }
func (e *Etcd) memberFile() string { return filepath.Join(e.cfg.Dir, "member-id") }
func (e *Etcd) recoverFile() string {
	return filepath.Join(e.cfg.Dir, "recover.snapshot")
}

// RunDir is the folder of the member's socket under its etcd folder dir:
// the one folder besides its data that etcd writes to.
func RunDir(dir string) string { return filepath.Join(dir, "run") }

// httpURL is where the member serves its HTTP to clients: a socket in its
// run folder (args).
func (e *Etcd) httpURL() string {
	return "unixs://" + filepath.Join(RunDir(e.cfg.Dir), "http.sock")
}

// ClientURL is the local member's client URL.
func (e *Etcd) ClientURL() string { return url(e.cfg.Address, certs.EtcdClientPort) }

func (e *Etcd) peerURL() string { return url(e.cfg.Address, certs.EtcdPeerPort) }

func url(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// hasData reports whether the data folder holds a member: its WAL, which
// etcd writes once the member has joined its cluster. A start that failed
// before (a join that raced another) leaves a member folder without one.
func (e *Etcd) hasData() bool {
	_, err := os.Stat(filepath.Join(e.dataDir(), "member", "wal"))

	return err == nil
}

// dataDirEmpty reports whether the data folder is missing or empty.
func (e *Etcd) dataDirEmpty() bool {
	entries, err := os.ReadDir(e.dataDir())

	return err != nil || len(entries) == 0
}

// peerEndpoints are the client URLs of the other control planes.
func (e *Etcd) peerEndpoints() []string {
	var out []string

	for _, ep := range e.cfg.Endpoints {
		host := ep
		if h, _, err := net.SplitHostPort(ep); err == nil {
			host = h
		}

		if host == e.cfg.Address || host == "" {
			continue
		}

		if u := url(host, certs.EtcdClientPort); !slices.Contains(out, u) {
			out = append(out, u)
		}
	}

	return out
}

// ErrNotControlPlane: etcd runs on control planes only.
var ErrNotControlPlane = errors.New("etcd: etcd runs on control planes only; this node runs none")

// NewBoot forgets what the previous boot asked (a bootstrap) and its client;
// the node calls it at each boot, before the service starts.
func (e *Etcd) NewBoot() {
	e.Close()

	e.mu.Lock()
	defer e.mu.Unlock()

	e.bootstrap, e.wake = nil, make(chan struct{})
}
