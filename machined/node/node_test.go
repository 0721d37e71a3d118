package node

import (
	"cmp"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/inherit"
)

// A reply's CA joins the node's only when a CA the node trusts signed it:
// a renewal never makes the node trust a CA on the reply's word alone.
func TestMergeCAs(t *testing.T) {
	now := time.Now()
	a := catest.NewCA(t, ca.Ed25519, now)
	stranger := catest.NewCA(t, ca.Ed25519, now)
	crossSigned := crossSign(t, catest.NewCA(t, ca.Ed25519, now), a)

	trusted, err := ca.NewAcceptedSet(now, a.Cert)
	if err != nil {
		t.Fatal(err)
	}

	reply, err := ca.NewAcceptedSet(now, a.Cert, stranger.Cert, crossSigned)
	if err != nil {
		t.Fatal(err)
	}

	merged, ignored := mergeCAs(trusted, reply)

	got, err := ca.ParseAcceptedSet(merged, now)
	if err != nil || len(got.Certificates()) != 2 || !got.Certificates()[0].Equal(a.Cert) || !got.Certificates()[1].Equal(crossSigned) {
		t.Fatalf("merged = %v, %v", got.Certificates(), err)
	}

	if len(ignored) != 1 || ignored[0] != stranger.Cert.Subject.String() {
		t.Fatalf("ignored = %v, want the stranger", ignored)
	}
}

// crossSign is ca's certificate re-signed by parent.
func crossSign(t *testing.T, c, parent *ca.CA) *x509.Certificate {
	t.Helper()

	der, err := x509.CreateCertificate(rand.Reader, c.Cert, parent.Cert, c.Cert.PublicKey, parent.Key)
	if err != nil {
		t.Fatal(err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	return cert
}

func TestAddressesPreferListenAddress(t *testing.T) {
	cfg := &certs.MachineConfig{Machine: certs.MachineSpec{ListenAddress: "127.5.0.9"}}

	got, err := addresses(cfg)
	if err != nil || !slices.Equal(got, []string{"127.5.0.9"}) {
		t.Fatalf("addresses = %v, %v", got, err)
	}

	cfg.Machine.ListenAddress = "0.0.0.0"

	all, err := addresses(cfg)
	if err != nil {
		t.Fatal(err)
	}

	for _, a := range all {
		if a == "0.0.0.0" || a == "127.0.0.1" {
			t.Fatalf("a wildcard or loopback address counts as the node's: %v", all)
		}
	}
}

func TestNodeNameArgs(t *testing.T) {
	cfg := &certs.MachineConfig{Cluster: certs.ClusterSpec{ControlPlane: certs.ControlPlaneSpec{
		Endpoints: []string{"127.5.0.2", "cp.example", "cp-2.example:50001", "[fd00::1]:50001", "fd00::2"},
	}}}

	want := []string{
		"--node-name", "127.5.0.2", "--node-name", "cp.example", "--node-name", "cp-2.example",
		"--node-name", "fd00::1", "--node-name", "fd00::2",
	}
	if got := nodeNameArgs(cfg); !slices.Equal(got, want) {
		t.Fatalf("nodeNameArgs = %q, want %q", got, want)
	}
}

// A worker asks trustd for what it can show: its own addresses (the
// listen address bound as the call's source), its name, which trustd
// grants when no other node holds it, and its certSANs; never 127.0.0.1,
// nor a hostname that is no DNS name.
func TestJoinNames(t *testing.T) {
	tests := []struct {
		name      string
		hostname  string
		listen    string
		addresses []string
		certSANs  []string
		source    string
		cn        string
		sans      []string
	}{
		{name: "listen address", listen: "127.0.0.5", addresses: []string{"127.0.0.5"}, source: "127.0.0.5", cn: "127.0.0.5", sans: []string{"127.0.0.5", "worker-1"}},
		{name: "with certSANs", listen: "10.0.0.5", addresses: []string{"10.0.0.5"}, certSANs: []string{"w.example", "10.0.0.5", "worker-1"}, source: "10.0.0.5", cn: "10.0.0.5", sans: []string{"10.0.0.5", "worker-1", "w.example"}},
		{name: "all addresses", listen: "0.0.0.0", addresses: []string{"10.0.0.5", "10.0.1.5"}, cn: "10.0.0.5", sans: []string{"10.0.0.5", "10.0.1.5", "worker-1"}},
		{name: "nothing known", cn: "worker-1", sans: []string{"worker-1"}},
		{name: "hostname no DNS name", hostname: "worker_1", listen: "127.0.0.5", addresses: []string{"127.0.0.5"}, source: "127.0.0.5", cn: "127.0.0.5", sans: []string{"127.0.0.5"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &certs.MachineConfig{Machine: certs.MachineSpec{ListenAddress: tt.listen, CertSANs: tt.certSANs}}
			c := &certController{cfg: cfg, hostname: cmp.Or(tt.hostname, "worker-1"), addresses: tt.addresses}

			source, cn, sans := c.joinNames()
			if source != tt.source || cn != tt.cn || !slices.Equal(sans, tt.sans) {
				t.Fatalf("joinNames = %q, %q, %v; want %q, %q, %v", source, cn, sans, tt.source, tt.cn, tt.sans)
			}
		})
	}
}

// TestWorkerHeldCertificateNeedsItsName: a worker does not put in use a
// held certificate that does not carry its name (one from before names
// were proven), so it joins again for one its heartbeats are accepted with.
func TestWorkerHeldCertificateNeedsItsName(t *testing.T) {
	c := &certController{cfg: &certs.MachineConfig{}, hostname: "worker-1", addresses: []string{"127.0.0.5"}}
	if got := c.hostsOf(serverKind); !slices.Equal(got, []string{"127.0.0.5", "worker-1"}) {
		t.Fatalf("a held worker certificate must be valid for %v, want its address and name", got)
	}
}

// TestNodeNameIsCanonical: the node's name is compared and recorded in
// one form, whatever case the config wrote it in.
func TestNodeNameIsCanonical(t *testing.T) {
	cfg := &certs.MachineConfig{Machine: certs.MachineSpec{Hostname: "Worker-1.Example"}}
	if got := hostname(cfg); got != "worker-1.example" {
		t.Fatalf("hostname = %q, want worker-1.example", got)
	}
}

// TestServicesInheritLogLevel: apid and trustd are started at machined's
// --log-level and in its --log-format, and (process runtime) on the
// sockets machined holds for their addresses.
func TestServicesInheritLogLevel(t *testing.T) {
	held := &inherit.Set{}
	defer held.Close()

	n := &Node{cfg: Config{LogLevel: slog.LevelDebug, LogFormat: daemonflag.FormatText, NodeCertTTL: NodeCertTTL, Listeners: held}}
	b := &bootState{cfg: &certs.MachineConfig{Machine: certs.MachineSpec{Type: certs.NodeControlPlane, ListenAddress: "127.5.0.9"}}}

	var procs []*processService

	for _, svc := range n.serviceDefinitions(b) {
		if p, ok := svc.(*processService); ok {
			procs = append(procs, p)
		}
	}

	if len(procs) != 2 {
		t.Fatalf("%d processes, want apid and trustd", len(procs))
	}

	for _, p := range procs {
		if i := slices.Index(p.args, "--log-level"); i < 0 || i+1 >= len(p.args) || p.args[i+1] != "debug" {
			t.Errorf("%s args %q lack --log-level debug", p.id, p.args)
		}

		if i := slices.Index(p.args, "--log-format"); i < 0 || i+1 >= len(p.args) || p.args[i+1] != "text" {
			t.Errorf("%s args %q lack --log-format text", p.id, p.args)
		}

		if i := slices.Index(p.args, "--listen-fd"); i < 1 || i+1 >= len(p.args) || p.args[i+1] != "3" ||
			!strings.HasPrefix(p.args[i-1], "127.5.0.9:5000") || len(p.files) != 1 {
			t.Errorf("%s args %q, %d files: want --listen ADDR --listen-fd 3 and the socket", p.id, p.args, len(p.files))
		}
	}
}

// TestHeldSocketsFollowTheConfig: a socket handed over for an address the
// config does not name (another listen address) is closed when the
// services are defined; the config's own are opened when apid and trustd
// start (the unit tests of internal/inherit keep one that is named).
func TestHeldSocketsFollowTheConfig(t *testing.T) {
	held := &inherit.Set{}
	defer held.Close()

	old, err := held.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	n := &Node{cfg: Config{NodeCertTTL: NodeCertTTL, Listeners: held}}
	n.serviceDefinitions(&bootState{cfg: &certs.MachineConfig{Machine: certs.MachineSpec{Type: certs.NodeWorker, ListenAddress: "127.5.0.9"}}})

	if got := held.Addrs(); len(got) != 0 {
		t.Fatalf("held %v, want nothing before apid starts", got)
	}

	if _, err := old.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the socket of another address is still open: %v", err)
	}
}

func TestDefaultImageDir(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	installed := filepath.Join(root, "lib", "aegis", "images")

	if got := defaultImageDir(bin); got != filepath.Join(bin, "images") {
		t.Fatalf("nothing there: %s", got)
	}

	if err := os.MkdirAll(installed, 0o755); err != nil {
		t.Fatal(err)
	}

	if got := defaultImageDir(bin); got != installed {
		t.Fatalf("installed tree: %s", got)
	}

	if err := os.MkdirAll(filepath.Join(bin, "images"), 0o755); err != nil {
		t.Fatal(err)
	}

	if got := defaultImageDir(bin); got != filepath.Join(bin, "images") {
		t.Fatalf("build tree: %s", got)
	}
}
