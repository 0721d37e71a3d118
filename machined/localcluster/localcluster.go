// Package localcluster runs a cluster of Aegis nodes on one machine: one
// machined process per node, each on its own loopback address with the
// standard ports, its state in a folder of the cluster's. aegisctl's
// cluster commands and the end-to-end tests are built on it.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/ociimage"
	"github.com/aegis-os/aegis/machined/containerd/preflight"
)

// Defaults of a local cluster.
const (
	DefaultName    = "aegis-local"
	DefaultCIDR    = "127.5.0.0/24"
	DefaultTimeout = 3 * time.Minute
	// MaxNodes bounds a cluster: every node is three processes.
	MaxNodes = 64
)

// Options describe a cluster to create. Zero values take the defaults.
type Options struct {
	Name          string
	ControlPlanes int // at least 1; zero means 1
	Workers       int // zero is allowed: a single control plane
	// CIDR gives node i (control planes first) address .(i+2).
	CIDR netip.Prefix
	// StateDir holds the cluster's folder, StateDir/Name.
	StateDir string
	// BinDir holds machined, apid and trustd.
	BinDir string
	// Timeout bounds the wait for the cluster to come up.
	Timeout time.Duration
	// Progress receives one line per change while the cluster comes up. Nil discards.
	Progress io.Writer
	// ClientConfig is the client config to merge the cluster's context
	// into; empty means none is written.
	ClientConfig string
	// NodeCertTTL is every machined's --node-cert-ttl: the lifetime of the
	// node certificates, 24 hours when zero. Short lifetimes are for tests
	// of renewal.
	NodeCertTTL time.Duration
	// HeartbeatInterval is every machined's --heartbeat-interval: how
	// often each node refreshes its member entry, 10 s when zero. Short
	// intervals are for tests of the age-out.
	HeartbeatInterval time.Duration
	// UpgradeTrial is every machined's --upgrade-trial: how long an
	// upgraded node has to be healthy before it goes back, 2 m when
	// zero. Short trials are for tests of the rollback.
	UpgradeTrial time.Duration
	// SkipBootstrap leaves etcd unbootstrapped (for a recovery from a
	// snapshot): Create then waits for every service but etcd.
	SkipBootstrap bool
	// Network is NetworkLoopback (the default) or NetworkNetns.
	Network string
	// NetnsPrefix starts the name of every network namespace and link of a
	// netns cluster; empty means the cluster's name.
	NetnsPrefix string
	// Metrics turns on every node's metrics endpoints (machine.metrics):
	// machined on NODE:9101, apid on NODE:9102, trustd on NODE:9103.
	Metrics bool
	// Runtime is every node's machine.runtime; empty means the process
	// runtime.
	Runtime certs.Runtime
}

// DefaultStateDir is ~/.aegis/clusters.
func DefaultStateDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("localcluster: no home directory for the default state dir: %w", err)
	}

	return filepath.Join(home, ".aegis", "clusters"), nil
}

func (o *Options) setDefaults() error {
	if o.Name == "" {
		o.Name = DefaultName
	}

	if o.ControlPlanes == 0 {
		o.ControlPlanes = 1
	}

	if o.Network == "" {
		o.Network = NetworkLoopback
	}

	if !o.CIDR.IsValid() {
		o.CIDR = netip.MustParsePrefix(DefaultCIDR)
		if o.Network == NetworkNetns {
			o.CIDR = netip.MustParsePrefix(DefaultNetnsCIDR)
		}
	}

	if o.Network == NetworkNetns && o.NetnsPrefix == "" {
		o.NetnsPrefix = o.Name
	}

	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}

	o.Progress = defaults.Output(o.Progress)

	if o.StateDir == "" {
		dir, err := DefaultStateDir()
		if err != nil {
			return err
		}

		o.StateDir = dir
	}

	// The nodes run elsewhere than here: every path they get is absolute.
	var err error
	if o.StateDir, err = filepath.Abs(o.StateDir); err != nil {
		return err
	}

	o.BinDir, err = filepath.Abs(o.BinDir)

	return err
}

func (o *Options) check() error {
	if err := certs.CheckClusterName(o.Name); err != nil {
		return fmt.Errorf("localcluster: name: %w", err)
	}

	switch {
	case o.ControlPlanes < 1 || o.Workers < 0:
		return errors.New("localcluster: at least one control plane, and no negative worker count")
	case o.ControlPlanes+o.Workers > MaxNodes:
		return fmt.Errorf("localcluster: %d nodes, limit %d", o.ControlPlanes+o.Workers, MaxNodes)
	case !o.CIDR.Addr().Is4():
		return fmt.Errorf("localcluster: CIDR %s: want an IPv4 prefix", o.CIDR)
	}

	if _, err := nodeAddress(o.CIDR, o.ControlPlanes+o.Workers-1); err != nil {
		return err
	}

	for _, bin := range []string{"machined", "apid", "trustd", "etcd"} {
		if st, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil || st.IsDir() {
			return fmt.Errorf("localcluster: binary %s not found in %s (run make build, or give the binaries' directory)", bin, o.BinDir)
		}
	}

	if o.Runtime.Containerd() {
		if err := checkContainerd(o.BinDir); err != nil {
			return err
		}
	}

	switch o.Network {
	case NetworkLoopback:
		return nil
	case NetworkNetns:
		return checkNetns(o.NetnsPrefix, o.CIDR)
	default:
		return fmt.Errorf("localcluster: network %q: want %s or %s", o.Network, NetworkLoopback, NetworkNetns)
	}
}

// checkContainerd refuses a cluster on the containerd runtime that the
// machine cannot run, or without the image archives next to the binaries,
// before anything is written.
func checkContainerd(binDir string) error {
	if err := preflight.Check(""); err != nil {
		return fmt.Errorf("localcluster: %w (or create the cluster with the process runtime)", err)
	}

	for _, svc := range ociimage.Services() {
		path := ociimage.ArchivePath(filepath.Join(binDir, "images"), svc.ID)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("localcluster: image archive %s not found (run make build)", path)
		}
	}

	return nil
}

// nodeAddress is the address of node i: .(i+2) of the CIDR.
func nodeAddress(cidr netip.Prefix, i int) (netip.Addr, error) {
	a := cidr.Masked().Addr().As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n := base + uint32(i) + 2
	addr := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})

	if !cidr.Contains(addr) || !cidr.Contains(addr.Next()) {
		return netip.Addr{}, fmt.Errorf("localcluster: CIDR %s has no room for node %d (address %s)", cidr, i+1, addr)
	}

	return addr, nil
}

// Create makes the cluster's secrets and configs, starts one machined per
// node detached from the caller, and waits until every node's services are
// up and every worker has joined. On any failure it stops what it started
// and removes what it wrote, and the error says why (with the last log lines
// of a node that failed). A service that keeps exiting fails it at once,
// naming the node and the service, rather than at the timeout.
func Create(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}

	if err := opts.check(); err != nil {
		return nil, err
	}

	c, err := prepare(opts)
	if err != nil {
		return nil, err
	}

	c.skipBootstrap = opts.SkipBootstrap

	if c.Net != nil {
		err = c.Net.setUp(c)
	}

	if err == nil {
		err = c.startAll()
	}

	if err == nil {
		err = c.watchCrashLoops(ctx, c.Nodes, make([]int64, len(c.Nodes)), func(ctx context.Context) error {
			return c.waitUp(ctx, opts.Timeout, opts.Progress)
		})
	}

	if err == nil && opts.ClientConfig != "" {
		err = c.mergeContext(opts.ClientConfig)
	}

	if err != nil {
		c.discard()

		return nil, err
	}

	return c, nil
}
