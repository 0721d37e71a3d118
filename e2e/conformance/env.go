package conformance

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// Options configure a run.
type Options struct {
	// ClusterDir is a local cluster's folder (localcluster's layout: the
	// manifest, secrets.yaml, aegisconfig, a folder per node). The cluster
	// needs a control plane and a worker. Required.
	ClusterDir string
	// ProbeAddress is the free loopback address of the test-only control
	// plane the suite adds to the cluster. Required.
	ProbeAddress string
	// NTPAddress is the loopback address the suite's NTP server listens on
	// (on a free port) as the test-only node's time source. Required.
	NTPAddress string
	// Sources is the loopback range trustd cases call from: trustd limits
	// failures per source address, so every caller gets its own. At least
	// a /23. Required.
	Sources netip.Prefix
	// Match selects cases by "group/name". Nil runs them all.
	Match *regexp.Regexp
	// Progress receives a line per phase of the run. Nil discards.
	Progress io.Writer
}

// Env is a run's view of the cluster: its nodes, its CA and the
// identities minted from it, and the connections the observations use.
type Env struct {
	opts    Options
	cluster *localcluster.Cluster
	// Target is the control plane the cases address, Worker a worker, and
	// Probe the suite's own control plane.
	Target, Worker, Probe string
	osCA                  *ca.CA
	roots                 *x509.CertPool
	static                string
	ids                   *identities
	tokens                tokenSet
	sources               *sources
	ntp                   *ntpServer

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newEnv(opts Options) (*Env, error) {
	opts.Progress = defaults.Output(opts.Progress)

	cluster, err := localcluster.Load(filepath.Dir(opts.ClusterDir), filepath.Base(opts.ClusterDir))
	if err != nil {
		return nil, err
	}

	e := &Env{opts: opts, cluster: cluster, Probe: opts.ProbeAddress, conns: map[string]*grpc.ClientConn{}}

	for _, n := range cluster.Nodes {
		switch {
		case n.Type.IsControlPlane() && e.Target == "":
			e.Target = n.Address
		case n.Type == certs.NodeWorker && e.Worker == "":
			e.Worker = n.Address
		}
	}

	if e.Target == "" || e.Worker == "" {
		return nil, errors.New("conformance: the cluster needs a control plane and a worker")
	}

	if e.sources, err = newSources(opts.Sources); err != nil {
		return nil, err
	}

	bundle, err := certs.LoadBundle(cluster.SecretsPath(), time.Now())
	if err != nil {
		return nil, err
	}

	if e.osCA, err = bundle.OSCA(time.Now()); err != nil {
		return nil, err
	}

	e.static = bundle.TrustdInfo.Token

	admin, err := e.loadAdmin()
	if err != nil {
		return nil, err
	}

	e.ids, err = mint(e.osCA, admin)

	return e, err
}

// loadAdmin reads the cluster's admin client config: its CAs become the
// roots every client trusts, its certificate the admin identity.
func (e *Env) loadAdmin() (Identity, error) {
	cfg, err := certs.LoadClientConfig(e.cluster.ClientConfigPath())
	if err != nil {
		return Identity{}, err
	}

	_, cc, err := cfg.Current()
	if err != nil {
		return Identity{}, err
	}

	set, err := ca.ParseAcceptedSet(cc.CA, time.Now())
	if err != nil {
		return Identity{}, err
	}

	e.roots = set.Pool()

	pair, err := tls.X509KeyPair(cc.Crt, cc.Key)
	if err != nil {
		return Identity{}, err
	}

	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return Identity{}, errors.New("conformance: admin key is not a signer")
	}

	return Identity{Name: "admin", Chain: []*x509.Certificate{pair.Leaf}, Key: key}, nil
}

// apidAddr is node's apid endpoint.
func apidAddr(node string) string { return net.JoinHostPort(node, strconv.Itoa(wire.APIDPort)) }

// trustdAddr is node's trustd endpoint.
func trustdAddr(node string) string { return net.JoinHostPort(node, strconv.Itoa(wire.TrustdPort)) }

// clientTLS is the TLS config of a client presenting id to node.
func (e *Env) clientTLS(node string, id Identity) *tls.Config {
	return &tls.Config{
		RootCAs:      e.roots,
		ServerName:   node,
		Certificates: id.TLSCertificate(),
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2"},
	}
}

// dial opens a gRPC connection to node's apid presenting id; the caller
// closes it.
func (e *Env) dial(node string, id Identity) (*grpc.ClientConn, error) {
	return dialTLS(apidAddr(node), e.clientTLS(node, id))
}

// dialTLS opens a gRPC connection to addr with cfg; the caller closes it.
// The receive limit is raised so that a reply is refused by the server's
// limits, not the client's.
func dialTLS(addr string, cfg *tls.Config) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// admin returns the shared admin connection to node's apid, for
// observations and set-up.
func (e *Env) admin(node string) (*grpc.ClientConn, error) {
	e.mu.Lock()
	defer e.mu.Unlock()

	if c, ok := e.conns[node]; ok {
		return c, nil
	}

	c, err := e.dial(node, e.ids.admin)
	if err != nil {
		return nil, err
	}

	e.conns[node] = c

	return c, nil
}

func (e *Env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()

	for _, c := range e.conns {
		c.Close() //nolint:errcheck // closing at the end of the run
	}

	e.conns = map[string]*grpc.ClientConn{}
}

// progress writes a line about the run.
func (e *Env) progress(format string, args ...any) {
	fmt.Fprintf(e.opts.Progress, format+"\n", args...)
}

// sources hands out loopback source addresses, one per trustd caller.
type sources struct {
	mu   sync.Mutex
	next netip.Addr
	pfx  netip.Prefix
}

// sourcesPerRun is the room one run needs in the source range: every
// trustd case takes an address, the race a hundred.
const sourcesPerRun = 512

// newSources starts at a random place of pfx: trustd remembers failures
// per address for a minute or so, and two runs close together against one
// cluster must not share addresses.
func newSources(pfx netip.Prefix) (*sources, error) {
	if !pfx.IsValid() || !pfx.Addr().IsLoopback() || pfx.Bits() > 23 || !pfx.Addr().Is4() {
		return nil, fmt.Errorf("conformance: source range %s: want an IPv4 loopback range of at least /23", pfx)
	}

	base := pfx.Masked().Addr().As4()
	size := uint32(1) << (32 - pfx.Bits())
	start := binary.BigEndian.Uint32(base[:]) + 1 + rand.Uint32N(size-sourcesPerRun-1)

	var next [4]byte

	binary.BigEndian.PutUint32(next[:], start)

	return &sources{next: netip.AddrFrom4(next), pfx: pfx}, nil
}

// take returns a source address no caller of this run has used.
func (s *sources) take() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	a := s.next
	if !s.pfx.Contains(a) || !s.pfx.Contains(a.Next()) {
		return "", errors.New("conformance: source range exhausted")
	}

	s.next = a.Next()

	return a.String(), nil
}
