package connect

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

func TestResolve(t *testing.T) {
	cc := &certs.ClientContext{Endpoints: []string{"10.0.0.1"}, Nodes: []string{"10.0.0.5"}}

	for _, tt := range []struct {
		name                 string
		cc                   *certs.ClientContext
		endpoints, nodes     []string
		wantEndpoints, wantN []string
		err                  string
	}{
		{name: "context defaults", cc: cc, wantEndpoints: []string{"10.0.0.1"}, wantN: []string{"10.0.0.5"}},
		{name: "given win", cc: cc, endpoints: []string{"10.0.0.2:50010"}, nodes: []string{"10.0.0.9"}, wantEndpoints: []string{"10.0.0.2:50010"}, wantN: []string{"10.0.0.9"}},
		{name: "no nodes", cc: &certs.ClientContext{Endpoints: []string{"10.0.0.1"}}, wantEndpoints: []string{"10.0.0.1"}},
		{name: "canonical and once", cc: cc, nodes: []string{"10.0.0.9", "::ffff:10.0.0.9", "[FD00::1]", "fd00:0::1", "CP.example."}, wantEndpoints: []string{"10.0.0.1"}, wantN: []string{"10.0.0.9", "fd00::1", "cp.example"}},
		{name: "no endpoints", cc: &certs.ClientContext{}, err: ErrNoEndpoints.Error()},
		{name: "bad endpoint", cc: cc, endpoints: []string{"bad host"}, err: "bad host"},
		{name: "node with a port", cc: cc, nodes: []string{"10.0.0.1:50000"}, err: `bad node "10.0.0.1:50000": node "10.0.0.1:50000": ports are not allowed`},
		{name: "node URL", cc: cc, nodes: []string{"https://10.0.0.1/"}, err: "not an IP address or a DNS name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			endpoints, nodes, err := Resolve(tt.cc, tt.endpoints, tt.nodes)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.err)
				}

				return
			}

			if err != nil || !slices.Equal(endpoints, tt.wantEndpoints) || !slices.Equal(nodes, tt.wantN) {
				t.Fatalf("Resolve = %q, %q, %v; want %q, %q", endpoints, nodes, err, tt.wantEndpoints, tt.wantN)
			}
		})
	}

	if _, _, err := Resolve(&certs.ClientContext{}, nil, nil); !errors.Is(err, ErrNoEndpoints) {
		t.Errorf("no endpoints: err = %v, want ErrNoEndpoints", err)
	}
}

func TestCredentials(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := catest.NewCA(t, ca.Ed25519, now)
	good := &certs.ClientContext{Crt: c.CertPEM, Key: c.KeyPEM, CA: c.CertPEM, Endpoints: []string{"127.0.0.1"}}

	if cert, err := Certificate("test", good); err != nil || cert.Subject.CommonName != c.Cert.Subject.CommonName {
		t.Fatalf("Certificate = %v, %v", cert, err)
	}

	cfg, err := TLSConfig("test", good)
	if err != nil || cfg.MinVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 || cfg.RootCAs == nil {
		t.Fatalf("TLSConfig = %+v, %v", cfg, err)
	}

	cl, err := Dial(context.Background(), Options{Name: "test", Context: good, Endpoints: good.Endpoints})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}

	cl.Close() //nolint:errcheck // nothing was sent

	for _, tt := range []struct {
		name string
		cc   *certs.ClientContext
		err  string
	}{
		{"no certificate", &certs.ClientContext{}, `context "test" has no client certificate`},
		{"bad certificate", &certs.ClientContext{Crt: []byte("junk")}, `context "test": client certificate:`},
		{"bad key", &certs.ClientContext{Crt: c.CertPEM, Key: []byte("junk"), CA: c.CertPEM}, `context "test": client key pair:`},
		{"no CA", &certs.ClientContext{Crt: c.CertPEM, Key: c.KeyPEM}, `context "test" has no CA certificate`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Certificate("test", tt.cc)
			if len(tt.cc.Crt) == 0 || string(tt.cc.Crt) == "junk" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Certificate: err = %v, want %q", err, tt.err)
				}

				return
			}

			if _, err := Dial(context.Background(), Options{Name: "test", Context: tt.cc, Endpoints: []string{"127.0.0.1"}}); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Dial: err = %v, want %q", err, tt.err)
			}
		})
	}
}
