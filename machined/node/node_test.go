package node

import (
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

// A worker asks trustd only for what it can show: its own addresses (the
// listen address bound as the call's source) and its certSANs, never
// 127.0.0.1 or its hostname.
func TestJoinNames(t *testing.T) {
	tests := []struct {
		name      string
		listen    string
		addresses []string
		certSANs  []string
		source    string
		cn        string
		sans      []string
	}{
		{name: "listen address", listen: "127.0.0.5", addresses: []string{"127.0.0.5"}, source: "127.0.0.5", cn: "127.0.0.5", sans: []string{"127.0.0.5"}},
		{name: "with certSANs", listen: "10.0.0.5", addresses: []string{"10.0.0.5"}, certSANs: []string{"w.example", "10.0.0.5"}, source: "10.0.0.5", cn: "10.0.0.5", sans: []string{"10.0.0.5", "w.example"}},
		{name: "all addresses", listen: "0.0.0.0", addresses: []string{"10.0.0.5", "10.0.1.5"}, cn: "10.0.0.5", sans: []string{"10.0.0.5", "10.0.1.5"}},
		{name: "nothing known", cn: "worker-1"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &certs.MachineConfig{Machine: certs.MachineSpec{ListenAddress: tt.listen, CertSANs: tt.certSANs}}
			c := &certController{cfg: cfg, hostname: "worker-1", addresses: tt.addresses}

			source, cn, sans := c.joinNames()
			if source != tt.source || cn != tt.cn || !slices.Equal(sans, tt.sans) {
				t.Fatalf("joinNames = %q, %q, %v; want %q, %q, %v", source, cn, sans, tt.source, tt.cn, tt.sans)
			}
		})
	}
}
