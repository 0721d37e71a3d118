package certs

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
)

// MachineConfigVersion is the only machine config version Aegis reads.
const MachineConfigVersion = "v1alpha1"

// Defaults and bounds of the machine config.
const (
	// DefaultMaxTimeOffset is how far the node's clock may be from its NTP
	// servers for the time gate to open.
	DefaultMaxTimeOffset = time.Second
	// MaxTimeOffsetLimit bounds maxOffset: certificates are backdated by
	// ca.ClockSkew, so a clock further off than that issues certificates its
	// peers do not yet accept.
	MaxTimeOffsetLimit = ca.ClockSkew
	// MinTimePollInterval and MaxTimePollInterval bound pollInterval: a
	// query a second is as often as a local NTP server should be asked,
	// and a clock checked less than hourly can drift out of bounds with
	// the time gate still open.
	MinTimePollInterval = time.Second
	MaxTimePollInterval = time.Hour
	// MaxListEntries bounds the lists of a machine config (SANs, servers,
	// endpoints, accepted CAs).
	MaxListEntries = 64
)

// NodeType is the role of a node in the cluster.
type NodeType string

// Node types. "init" is the first control plane, kept for Talos compatibility.
const (
	NodeInit         NodeType = "init"
	NodeControlPlane NodeType = "controlplane"
	NodeWorker       NodeType = "worker"
)

// IsControlPlane reports whether the node holds the OS CA key and runs trustd.
func (t NodeType) IsControlPlane() bool { return t == NodeInit || t == NodeControlPlane }

// MachineConfig is the one declarative document a node boots from.
type MachineConfig struct {
	Version string      `yaml:"version"`
	Machine MachineSpec `yaml:"machine"`
	Cluster ClusterSpec `yaml:"cluster"`

	// Parsed forms, filled by Validate.
	osCA   *ca.CA
	etcdCA *ca.CA
	// etcdTrusted is the etcd CA and the accepted etcd CAs.
	etcdTrusted []*x509.Certificate
	caCert      *x509.Certificate
	accepted    *ca.AcceptedSet
	token       token.Token
	previous    []AcceptedToken
}

// MachineSpec describes the node itself.
type MachineSpec struct {
	Type NodeType `yaml:"type"`
	// Hostname defaults to the host's name.
	Hostname string `yaml:"hostname,omitempty"`
	// ListenAddress is the address apid and trustd bind; empty means all.
	ListenAddress string `yaml:"listenAddress,omitempty"`
	// Token is the trustd token nodes join with.
	Token string `yaml:"token"`
	// PreviousTokens are former tokens trustd still accepts, each until its
	// expiry: the overlap of a static token rotation. Control planes only.
	PreviousTokens []PreviousToken `yaml:"previousTokens,omitempty"`
	// CA is the OS CA: certificate and key on control planes, certificate only on workers.
	CA CertAndKey `yaml:"ca"`
	// AcceptedCAs are CAs trusted besides CA, such as the old CA during a rotation.
	AcceptedCAs []CertAndKey `yaml:"acceptedCAs,omitempty"`
	// CertSANs are extra names and addresses for the node's certificates.
	CertSANs []string `yaml:"certSANs,omitempty"`
	Time     TimeSpec `yaml:"time"`
	// Metrics turns on the Prometheus endpoints of machined, apid and
	// trustd, on ListenAddress. Off unless enabled.
	Metrics MetricsSpec `yaml:"metrics,omitempty"`
	// Runtime runs apid, trustd and etcd: RuntimeContainerd or
	// RuntimeProcess. Empty means RuntimeProcess, as before the field was.
	Runtime Runtime `yaml:"runtime,omitempty"`
}

// Default ports of the metrics endpoints: beside node_exporter's 9100,
// one per daemon, the same on every node.
const (
	DefaultMachinedMetricsPort = 9101
	DefaultAPIDMetricsPort     = 9102
	DefaultTrustdMetricsPort   = 9103
)

// MetricsSpec configures the Prometheus endpoints: plain HTTP, GET
// /metrics only, on the node's listen address.
type MetricsSpec struct {
	// Enabled serves the endpoints; false (the default) serves none.
	Enabled bool `yaml:"enabled,omitempty"`
	// MachinedPort, APIDPort and TrustdPort override the default ports
	// (DefaultMachinedMetricsPort, …); zero means the default.
	MachinedPort int `yaml:"machinedPort,omitempty"`
	APIDPort     int `yaml:"apidPort,omitempty"`
	TrustdPort   int `yaml:"trustdPort,omitempty"`
}

// MetricsListen returns the address of a daemon's metrics endpoint
// ("machined", "apid" or "trustd"), or "" when metrics are off.
func (c *MachineConfig) MetricsListen(daemon string) string {
	m := c.Machine.Metrics
	if !m.Enabled {
		return ""
	}

	port := map[string]int{"machined": m.MachinedPort, "apid": m.APIDPort, "trustd": m.TrustdPort}[daemon]
	if port == 0 {
		port = map[string]int{
			"machined": DefaultMachinedMetricsPort, "apid": DefaultAPIDMetricsPort, "trustd": DefaultTrustdMetricsPort,
		}[daemon]
	}

	return net.JoinHostPort(c.Machine.ListenAddress, strconv.Itoa(port))
}

// Runtime is how a node runs its system services.
type Runtime string

// Runtimes.
const (
	// RuntimeProcess runs each service as a child process of machined,
	// with machined's user: for machines without root.
	RuntimeProcess Runtime = "process"
	// RuntimeContainerd runs each service as a confined container of the
	// node's own containerd.
	RuntimeContainerd Runtime = "containerd"
)

// Containerd reports whether the node runs its services in containers.
func (r Runtime) Containerd() bool { return r == RuntimeContainerd }

// TimeSpec says how the node knows its clock is right: NTP servers, or a
// host clock declared trusted (local clusters on one machine).
type TimeSpec struct {
	Servers        []string      `yaml:"servers,omitempty"`
	TrustHostClock bool          `yaml:"trustHostClock,omitempty"`
	MaxOffset      time.Duration `yaml:"maxOffset,omitempty"`
	// PollInterval is the wait between queries while the clock is in
	// bounds; zero means the time service's default (64 s, as NTP's
	// default poll).
	PollInterval time.Duration `yaml:"pollInterval,omitempty"`
}

// ClusterSpec describes the cluster the node belongs to.
type ClusterSpec struct {
	Name         string           `yaml:"name"`
	ControlPlane ControlPlaneSpec `yaml:"controlPlane"`
	Etcd         EtcdSpec         `yaml:"etcd,omitempty"`
	// WorkerSANs are the names and addresses (allowed-SAN patterns, as
	// `aegisctl token create --allow-san` takes them) that the static token
	// obtains besides the address a worker calls from; a control plane's
	// address or name is never one of them, whatever the pattern.
	WorkerSANs []string `yaml:"workerSANs,omitempty"`
}

// ControlPlaneSpec says where the control planes are.
type ControlPlaneSpec struct {
	// Endpoints are host or host:port of control planes; workers join through them.
	Endpoints []string `yaml:"endpoints,omitempty"`
}

// ParseMachineConfig decodes data strictly and validates it at time now.
func ParseMachineConfig(what string, data []byte, now time.Time) (*MachineConfig, error) {
	var c MachineConfig
	if err := decodeStrict(what, data, &c); err != nil {
		return nil, err
	}

	if err := c.Validate(what, now); err != nil {
		return nil, err
	}

	return &c, nil
}

// LoadMachineConfig reads and validates the machine config at path.
func LoadMachineConfig(path string, now time.Time) (*MachineConfig, error) {
	data, err := readDocument(path)
	if err != nil {
		return nil, err
	}

	return ParseMachineConfig(path, data, now)
}

// Marshal encodes the config as YAML.
func (c *MachineConfig) Marshal() ([]byte, error) { return encodeYAML(c) }

// Save writes the config with mode 0600 (it holds the token and, on control
// planes, the CA key); an existing file is kept unless overwrite is set.
func (c *MachineConfig) Save(path string, overwrite bool) error {
	data, err := c.Marshal()
	if err != nil {
		return err
	}

	return atomicfile.Write(path, data, 0o600, atomicfile.Options{Overwrite: overwrite})
}

// OSCA returns the OS CA with its key on a control plane, nil on a worker.
func (c *MachineConfig) OSCA() *ca.CA { return c.osCA }

// CACertificate returns the OS CA certificate.
func (c *MachineConfig) CACertificate() *x509.Certificate { return c.caCert }

// AcceptedCAs returns the OS CA and every accepted CA, the set peers are verified against.
func (c *MachineConfig) AcceptedCAs() *ca.AcceptedSet { return c.accepted }

// TrustdToken returns the parsed trustd token.
func (c *MachineConfig) TrustdToken() token.Token { return c.token }

// MaxTimeOffset returns the configured offset bound or its default.
func (c *MachineConfig) MaxTimeOffset() time.Duration {
	if c.Machine.Time.MaxOffset == 0 {
		return DefaultMaxTimeOffset
	}

	return c.Machine.Time.MaxOffset
}

// Validate checks the config at time now, reports every problem with its
// path, and on success fills the parsed forms the accessors return.
func (c *MachineConfig) Validate(what string, now time.Time) error {
	var ps problems

	if c.Version != MachineConfigVersion {
		ps.add("version", "%q is not supported (want %s)", c.Version, MachineConfigVersion)
	}

	// In document order, so the list reads like the file.
	c.validateMachine(&ps)
	c.validateTrust(&ps, now)
	c.validateSANs(&ps)
	c.validateTime(&ps)
	c.validateMetrics(&ps)
	c.validateCluster(&ps)
	c.validateEtcd(&ps, now)

	return ps.err(what)
}

func (c *MachineConfig) validateMachine(ps *problems) {
	m := &c.Machine

	switch m.Type {
	case NodeInit, NodeControlPlane, NodeWorker:
	case "":
		ps.add("machine.type", "required (init, controlplane or worker)")
	default:
		ps.add("machine.type", "%q is not init, controlplane or worker", m.Type)
	}

	if m.Hostname != "" {
		ps.addErr("machine.hostname", ca.CheckDNSName(m.Hostname))
	}

	if m.ListenAddress != "" {
		if _, err := netip.ParseAddr(m.ListenAddress); err != nil {
			ps.add("machine.listenAddress", "%q is not an IP address", m.ListenAddress)
		}
	}

	switch m.Runtime {
	case "", RuntimeProcess, RuntimeContainerd:
	default:
		ps.add("machine.runtime", "%q is not containerd or process", m.Runtime)
	}
}

func (c *MachineConfig) validateSANs(ps *problems) {
	m := &c.Machine

	checkListLen(ps, "machine.certSANs", len(m.CertSANs))

	for i, san := range m.CertSANs {
		if _, err := netip.ParseAddr(san); err != nil {
			ps.addErr(index("machine.certSANs", i), ca.CheckDNSName(san))
		}
	}
}

func (c *MachineConfig) validateTime(ps *problems) {
	t := &c.Machine.Time

	switch {
	case len(t.Servers) == 0 && !t.TrustHostClock:
		ps.add("machine.time", "set servers, or trustHostClock: true for a clock that needs no sync")
	case len(t.Servers) > 0 && t.TrustHostClock:
		ps.add("machine.time", "servers and trustHostClock exclude each other")
	}

	checkListLen(ps, "machine.time.servers", len(t.Servers))

	for i, s := range t.Servers {
		if err := CheckHostPort(s); err != nil {
			ps.add(index("machine.time.servers", i), "%v", err)
		}
	}

	if t.MaxOffset < 0 || t.MaxOffset > MaxTimeOffsetLimit {
		ps.add("machine.time.maxOffset", "%s outside [0, %s] (0 means %s)", t.MaxOffset, MaxTimeOffsetLimit, DefaultMaxTimeOffset)
	}

	if t.PollInterval != 0 && (t.PollInterval < MinTimePollInterval || t.PollInterval > MaxTimePollInterval) {
		ps.add("machine.time.pollInterval", "%s outside [%s, %s] (0 means the default)", t.PollInterval, MinTimePollInterval, MaxTimePollInterval)
	}
}

// validateMetrics checks the metrics ports: each a TCP port, none taken by
// another metrics endpoint or by the node's own services.
func (c *MachineConfig) validateMetrics(ps *problems) {
	m := &c.Machine.Metrics
	taken := map[int]string{wire.APIDPort: "apid", wire.TrustdPort: "trustd", EtcdClientPort: "etcd", EtcdPeerPort: "etcd"}

	for _, p := range []struct {
		field string
		port  int
		def   int
	}{
		{"machinedPort", m.MachinedPort, DefaultMachinedMetricsPort},
		{"apidPort", m.APIDPort, DefaultAPIDMetricsPort},
		{"trustdPort", m.TrustdPort, DefaultTrustdMetricsPort},
	} {
		path := "machine.metrics." + p.field

		switch {
		case p.port < 0 || p.port > 65535:
			ps.add(path, "%d is not a TCP port (1 to 65535; 0 means %d)", p.port, p.def)

			continue
		case p.port != 0 && !m.Enabled:
			ps.add(path, "set while metrics are off: add enabled: true")
		}

		port := p.port
		if port == 0 {
			port = p.def
		}

		if other, ok := taken[port]; ok {
			ps.add(path, "port %d is already %s's", port, other)

			continue
		}

		taken[port] = "the metrics " + strings.TrimSuffix(p.field, "Port")
	}
}

func (c *MachineConfig) validateCluster(ps *problems) {
	if err := CheckClusterName(c.Cluster.Name); err != nil {
		ps.add("cluster.name", "%v", err)
	}

	eps := c.Cluster.ControlPlane.Endpoints
	if c.Machine.Type == NodeWorker && len(eps) == 0 {
		ps.add("cluster.controlPlane.endpoints", "required on workers (where trustd runs)")
	}

	checkListLen(ps, "cluster.controlPlane.endpoints", len(eps))

	for i, ep := range eps {
		if err := CheckHostPort(ep); err != nil {
			ps.add(index("cluster.controlPlane.endpoints", i), "%v", err)
		}
	}

	if _, err := sanpolicy.Parse(c.Cluster.WorkerSANs); err != nil {
		ps.add("cluster.workerSANs", "%v", err)
	}
}

// validateTrust checks the token and the CAs and keeps their parsed forms.
func (c *MachineConfig) validateTrust(ps *problems, now time.Time) {
	m := &c.Machine

	checkToken(ps, "machine.token", m.Token)
	c.token, _ = token.Parse(m.Token)
	c.validatePreviousTokens(ps, now)

	before := len(*ps)

	if m.Type == NodeWorker && len(m.CA.Key) > 0 {
		checkCAPair(ps, "machine.ca", &CertAndKey{Crt: m.CA.Crt}, false, now)
		ps.add("machine.ca.key", "must be empty on workers: only control planes hold the CA key")
	} else {
		checkCAPair(ps, "machine.ca", &m.CA, m.Type.IsControlPlane(), now)
	}

	checkListLen(ps, "machine.acceptedCAs", len(m.AcceptedCAs))

	for i := range m.AcceptedCAs {
		path := index("machine.acceptedCAs", i)
		if len(m.AcceptedCAs[i].Key) > 0 {
			ps.add(path+".key", "accepted CAs are certificates only")
		}

		checkCAPair(ps, path, &CertAndKey{Crt: m.AcceptedCAs[i].Crt}, false, now)
	}

	if len(*ps) > before {
		return
	}

	c.fillTrust(now)
}

// fillTrust parses what validateTrust has already checked.
func (c *MachineConfig) fillTrust(now time.Time) {
	c.caCert, _ = ca.ParseCertificate(c.Machine.CA.Crt)
	if len(c.Machine.CA.Key) > 0 {
		c.osCA, _ = ca.Parse(c.Machine.CA.Crt, c.Machine.CA.Key, now)
	}

	certs := []*x509.Certificate{c.caCert}

	for _, a := range c.Machine.AcceptedCAs {
		cert, _ := ca.ParseCertificate(a.Crt)
		certs = append(certs, cert)
	}

	c.accepted, _ = ca.NewAcceptedSet(now, certs...)
}

func checkListLen(ps *problems, path string, n int) {
	if n > MaxListEntries {
		ps.add(path, "%d entries, limit %d", n, MaxListEntries)
	}
}

// CheckClusterName checks a cluster name: a DNS label, as it names contexts,
// folders and certificates.
func CheckClusterName(name string) error {
	if name == "" {
		return fmt.Errorf("required")
	}

	if err := ca.CheckDNSName(name); err != nil || len(name) > 63 || strings.Contains(name, ".") {
		return fmt.Errorf("%q is not a DNS label (letters, digits and '-', at most 63)", name)
	}

	return nil
}

// CheckHostPort checks "host", "host:port", "[v6]:port" or a bare IPv6 address.
func CheckHostPort(s string) error {
	host := s

	if h, port, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q has an invalid port", s)
		}

		host = h
	}

	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}

	if err := ca.CheckDNSName(host); err != nil {
		return fmt.Errorf("%q is not a host, IP address or host:port", s)
	}

	return nil
}
