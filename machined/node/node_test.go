package node

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

func TestServerHosts(t *testing.T) {
	tests := []struct {
		hostname  string
		addresses []string
		sans      []string
		want      []string
	}{
		{hostname: "cp-1", addresses: []string{"127.5.0.2"}, sans: []string{"cp.example"}, want: []string{"127.5.0.2", "127.0.0.1", "cp-1", "cp.example"}},
		{hostname: "cp-1", addresses: []string{"127.0.0.1"}, sans: []string{"cp-1", "127.0.0.1"}, want: []string{"127.0.0.1", "cp-1"}},
		{hostname: "Not A DNS Name!", addresses: []string{"10.0.0.1"}, want: []string{"10.0.0.1", "127.0.0.1"}},
	}

	for _, tt := range tests {
		if got := serverHosts(tt.hostname, tt.addresses, tt.sans); !slices.Equal(got, tt.want) {
			t.Errorf("serverHosts(%q, %v, %v) = %v, want %v", tt.hostname, tt.addresses, tt.sans, got, tt.want)
		}
	}
}

func TestMergeCAs(t *testing.T) {
	a := catest.NewCA(t, ca.Ed25519, time.Now())
	b := catest.NewCA(t, ca.Ed25519, time.Now())

	set, err := ca.NewAcceptedSet(time.Now(), a.Cert, b.Cert)
	if err != nil {
		t.Fatal(err)
	}

	merged := mergeCAs(a.CertPEM, set)

	got, err := ca.ParseAcceptedSet(merged, time.Now())
	if err != nil || len(got.Certificates()) != 2 || !got.Certificates()[0].Equal(a.Cert) {
		t.Fatalf("merged = %v, %v", got, err)
	}
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

	want := []string{"--node-name", "cp.example", "--node-name", "cp-2.example"}
	if got := nodeNameArgs(cfg); !slices.Equal(got, want) {
		t.Fatalf("nodeNameArgs = %q, want %q", got, want)
	}
}

// TestServicesInheritLogLevel: apid and trustd are started at machined's
// --log-level.
func TestServicesInheritLogLevel(t *testing.T) {
	n := &Node{cfg: Config{LogLevel: slog.LevelDebug, NodeCertTTL: NodeCertTTL}}
	b := &bootState{cfg: &certs.MachineConfig{Machine: certs.MachineSpec{Type: certs.NodeControlPlane, ListenAddress: "127.5.0.9"}}}

	svcs := n.serviceDefinitions(b)
	if len(svcs) != 2 {
		t.Fatalf("%d services, want apid and trustd", len(svcs))
	}

	for _, svc := range svcs {
		p := svc.(*processService)
		if i := slices.Index(p.args, "--log-level"); i < 0 || i+1 >= len(p.args) || p.args[i+1] != "debug" {
			t.Errorf("%s args %q lack --log-level debug", p.id, p.args)
		}
	}
}
