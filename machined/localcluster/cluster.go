package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/wire"
)

// manifestFile records a cluster's nodes and processes in its folder.
const manifestFile = "cluster.json"

// Cluster is a local cluster on disk, with its running processes.
type Cluster struct {
	Name string `json:"name"`
	// Dir is the cluster's folder: secrets.yaml, aegisconfig and one folder per node.
	Dir    string `json:"dir"`
	BinDir string `json:"binDir"`
	Nodes  []Node `json:"nodes"`
	// ClientConfig is where the cluster's context was merged, if anywhere.
	ClientConfig string `json:"clientConfig,omitempty"`
	// NodeCertTTL is given to every machined as --node-cert-ttl; zero
	// leaves machined's default.
	NodeCertTTL time.Duration `json:"nodeCertTTL,omitempty"`
	// Metrics turns on every node's metrics endpoints (machine.metrics).
	Metrics bool `json:"metrics,omitempty"`

	// Net is the network of a netns cluster; nil on loopback.
	Net *Net `json:"net,omitempty"`
	// HeartbeatInterval is given to every machined as
	// --heartbeat-interval; zero leaves machined's default.
	HeartbeatInterval time.Duration `json:"heartbeatInterval,omitempty"`
	// UpgradeTrial is given to every machined as --upgrade-trial; zero
	// leaves machined's default.
	UpgradeTrial time.Duration `json:"upgradeTrial,omitempty"`
	// Runtime is every node's machine.runtime; empty leaves it out (the
	// process runtime).
	Runtime certs.Runtime `json:"runtime,omitempty"`

	skipBootstrap bool // Create leaves etcd unbootstrapped
}

// Node is one node of a local cluster.
type Node struct {
	Name    string         `json:"name"`
	Type    certs.NodeType `json:"type"`
	Address string         `json:"address"`
	// PID of the node's machined; zero before it starts.
	PID int `json:"pid"`
}

// nodeDir is the node's folder in the cluster's, named without the cluster
// prefix: the node's Unix socket paths must stay under 108 bytes.
func (c *Cluster) nodeDir(n Node) string {
	return filepath.Join(c.Dir, strings.TrimPrefix(n.Name, c.Name+"-"))
}

// ConfigPath is the node's machine config.
func (c *Cluster) ConfigPath(n Node) string { return filepath.Join(c.nodeDir(n), "config.yaml") }

// StatePath is the node's state directory.
func (c *Cluster) StatePath(n Node) string { return filepath.Join(c.nodeDir(n), "state") }

// LogPath is where the node's machined writes its output.
func (c *Cluster) LogPath(n Node) string { return filepath.Join(c.nodeDir(n), "machined.log") }

// SecretsPath is the cluster's secrets bundle.
func (c *Cluster) SecretsPath() string { return filepath.Join(c.Dir, "secrets.yaml") }

// ClientConfigPath is the cluster's own client config with an admin context.
func (c *Cluster) ClientConfigPath() string { return filepath.Join(c.Dir, "aegisconfig") }

// ControlPlanes returns the control-plane nodes.
func (c *Cluster) ControlPlanes() []Node {
	var out []Node

	for _, n := range c.Nodes {
		if n.Type.IsControlPlane() {
			out = append(out, n)
		}
	}

	return out
}

// Addresses returns every node's address, control planes first.
func (c *Cluster) Addresses() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Address
	}

	return out
}

// Load reads the cluster name from stateDir.
func Load(stateDir, name string) (*Cluster, error) {
	if err := certs.CheckClusterName(name); err != nil {
		return nil, fmt.Errorf("localcluster: name: %w", err)
	}

	data, err := os.ReadFile(filepath.Join(stateDir, name, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("localcluster: no cluster %q in %s", name, stateDir)
	}

	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	var c Cluster
	if err = json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("localcluster: %s: %w", filepath.Join(stateDir, name, manifestFile), err)
	}

	return &c, nil
}

func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}

	return atomicfile.Write(filepath.Join(c.Dir, manifestFile), append(data, '\n'), 0o600, atomicfile.Options{Overwrite: true})
}

// prepare refuses a cluster that exists or addresses that are taken, then
// writes the secrets, the configs and the manifest.
func prepare(opts Options) (*Cluster, error) {
	c := &Cluster{Name: opts.Name, Dir: filepath.Join(opts.StateDir, opts.Name), BinDir: opts.BinDir, NodeCertTTL: opts.NodeCertTTL, Metrics: opts.Metrics,
		HeartbeatInterval: opts.HeartbeatInterval, UpgradeTrial: opts.UpgradeTrial, Runtime: opts.Runtime}
	if opts.Network == NetworkNetns {
		c.Net = newNet(opts.NetnsPrefix, opts.CIDR)
	}

	if _, err := os.Stat(c.Dir); err == nil {
		return nil, fmt.Errorf("localcluster: cluster %q exists in %s; destroy it first", opts.Name, c.Dir)
	}

	for i := range opts.ControlPlanes + opts.Workers {
		addr, _ := nodeAddress(opts.CIDR, i)
		n := Node{Type: certs.NodeControlPlane, Address: addr.String()}
		n.Name = fmt.Sprintf("%s-controlplane-%d", opts.Name, i+1)

		if i >= opts.ControlPlanes {
			n.Type = certs.NodeWorker
			n.Name = fmt.Sprintf("%s-worker-%d", opts.Name, i-opts.ControlPlanes+1)
		}

		// A netns node's addresses are its own namespace's, made later.
		if c.Net == nil {
			if err := portsFree(n.Address, n.Type.IsControlPlane(), c.Metrics); err != nil {
				return nil, err
			}
		}

		c.Nodes = append(c.Nodes, n)
	}

	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	if err := c.writeFiles(); err != nil {
		os.RemoveAll(c.Dir) //nolint:errcheck // undoing our own fresh folder

		return nil, err
	}

	return c, nil
}

// portsFree checks that apid's and trustd's ports, on control planes
// etcd's, and with metrics the metrics ports, are free on addr.
func portsFree(addr string, controlPlane, metrics bool) error {
	ports := []int{wire.APIDPort, wire.TrustdPort}
	if controlPlane {
		ports = append(ports, certs.EtcdClientPort, certs.EtcdPeerPort)
	}

	if metrics {
		ports = append(ports, certs.DefaultMachinedMetricsPort, certs.DefaultAPIDMetricsPort, certs.DefaultTrustdMetricsPort)
	}

	for _, port := range ports {
		hp := net.JoinHostPort(addr, strconv.Itoa(port))

		lis, err := net.Listen("tcp", hp)
		if err != nil {
			return fmt.Errorf("localcluster: %s is not free (another cluster or program uses it?): %w", hp, err)
		}

		lis.Close()
	}

	return nil
}

// writeFiles writes the bundle, every node's config, the admin client
// config and the manifest.
func (c *Cluster) writeFiles() error {
	bundle, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		return err
	}

	if err = bundle.Save(c.SecretsPath(), false); err != nil {
		return err
	}

	var endpoints []string

	for _, n := range c.ControlPlanes() {
		endpoints = append(endpoints, n.Address)
	}

	now := time.Now()

	for _, n := range c.Nodes {
		cfg, err := c.nodeConfig(bundle, n, endpoints, now)
		if err != nil {
			return err
		}

		if err = cfg.Save(c.ConfigPath(n), false); err != nil {
			return err
		}
	}

	if err = c.writeClientConfig(bundle, endpoints, now); err != nil {
		return err
	}

	return c.save()
}
