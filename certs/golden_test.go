package certs_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	goldenBundle       = "testdata/secrets.yaml"
	goldenControlPlane = "testdata/controlplane.yaml"
	goldenWorker       = "testdata/worker.yaml"
	goldenClient       = "testdata/aegisconfig"
)

// TestUpdateGolden regenerates the golden files with -update; otherwise it
// does nothing. The keys in them are test keys, valid from catest.Epoch.
func TestUpdateGolden(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate the golden files")
	}

	b, err := certs.GenerateBundle(certs.BundleOptions{Clock: catest.FixedClock(catest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}

	writeGolden(t, goldenBundle, must(b.Marshal()))

	opts := certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.5.0.2", TimeServers: []string{"127.0.0.1:10123"}, CertSANs: []string{"demo.example"}}
	for path, typ := range map[string]certs.NodeType{goldenControlPlane: certs.NodeControlPlane, goldenWorker: certs.NodeWorker} {
		c, err := certs.GenerateMachineConfig(b, typ, opts, catest.Epoch)
		if err != nil {
			t.Fatal(err)
		}

		writeGolden(t, path, must(c.Marshal()))
	}

	osCA, err := b.OSCA(catest.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	cc, err := certs.NewClientCertificate(catest.NewIssuer(t, osCA, catest.Epoch), certs.ClientCertOptions{Roles: role.NewSet(role.Admin), CommonName: "admin"})
	if err != nil {
		t.Fatal(err)
	}

	client := certs.NewClientConfig("demo", []string{"127.5.0.2"}, osCA.CertPEM, cc)
	client.Contexts["demo"].Nodes = []string{"127.5.0.2", "127.5.0.3"}
	writeGolden(t, goldenClient, must(client.Marshal()))
}

// TestGoldenFormats pins the three file formats: each golden file must load,
// validate, and encode back to the same bytes.
func TestGoldenFormats(t *testing.T) {
	tests := []struct {
		path string
		load func(data []byte) ([]byte, error)
	}{
		{goldenBundle, func(data []byte) ([]byte, error) {
			b, err := certs.ParseBundle(goldenBundle, data, catest.Epoch)
			if err != nil {
				return nil, err
			}

			return b.Marshal()
		}},
		{goldenControlPlane, func(data []byte) ([]byte, error) {
			c, err := certs.ParseMachineConfig(goldenControlPlane, data, catest.Epoch)
			if err != nil {
				return nil, err
			}

			if c.OSCA() == nil || !c.Machine.Type.IsControlPlane() {
				t.Error("control plane config has no usable OS CA")
			}

			return c.Marshal()
		}},
		{goldenWorker, func(data []byte) ([]byte, error) {
			c, err := certs.ParseMachineConfig(goldenWorker, data, catest.Epoch)
			if err != nil {
				return nil, err
			}

			if c.OSCA() != nil || c.CACertificate() == nil || len(c.AcceptedCAs().Certificates()) != 1 {
				t.Error("worker config: want the CA certificate alone, without key")
			}

			return c.Marshal()
		}},
		{goldenClient, func(data []byte) ([]byte, error) {
			c, err := certs.ParseClientConfig(goldenClient, data)
			if err != nil {
				return nil, err
			}

			return c.Marshal()
		}},
	}

	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			want, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}

			got, err := tt.load(want)
			if err != nil {
				t.Fatal(err)
			}

			if !bytes.Equal(got, want) {
				t.Fatalf("re-encoded %s differs from the golden file:\n%s", tt.path, got)
			}
		})
	}
}

func writeGolden(t *testing.T, path string, data []byte) {
	t.Helper()

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}

	return b
}
