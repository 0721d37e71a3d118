package certs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/golden"
)

const (
	goldenBundle       = "testdata/secrets.yaml"
	goldenControlPlane = "testdata/controlplane.yaml"
	goldenWorker       = "testdata/worker.yaml"
	goldenClient       = "testdata/aegisconfig"
)

// TestUpdateGolden regenerates the golden files with -update; otherwise it
// does nothing. The keys in them are test keys, valid from testutil.Epoch.
func TestUpdateGolden(t *testing.T) {
	if !golden.Update() {
		t.Skip("run with -update to regenerate the golden files")
	}

	b, err := certs.GenerateBundle(certs.BundleOptions{Clock: catest.FixedClock(testutil.Epoch)})
	if err != nil {
		t.Fatal(err)
	}

	golden.Write(t, goldenBundle, must(b.Marshal()))

	opts := certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.5.0.2", TimeServers: []string{"127.0.0.1:10123"}, CertSANs: []string{"demo.example"}}
	for path, typ := range map[string]certs.NodeType{goldenControlPlane: certs.NodeControlPlane, goldenWorker: certs.NodeWorker} {
		c, err := certs.GenerateMachineConfig(b, typ, opts, testutil.Epoch)
		if err != nil {
			t.Fatal(err)
		}

		golden.Write(t, path, must(c.Marshal()))
	}

	osCA, err := b.OSCA(testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	cc, err := certs.NewClientCertificate(catest.NewIssuer(t, osCA, testutil.Epoch), certs.ClientCertOptions{Roles: role.NewSet(role.Admin), CommonName: "admin"})
	if err != nil {
		t.Fatal(err)
	}

	client := certs.NewClientConfig("demo", []string{"127.5.0.2"}, osCA.CertPEM, cc)
	client.Contexts["demo"].Nodes = []string{"127.5.0.2", "127.5.0.3"}
	golden.Write(t, goldenClient, must(client.Marshal()))
}

// TestGoldenFormats pins the three file formats: each golden file must load,
// validate, and encode back to the same bytes.
func TestGoldenFormats(t *testing.T) {
	tests := []struct {
		path string
		load func(data []byte) ([]byte, error)
	}{
		{goldenBundle, func(data []byte) ([]byte, error) {
			b, err := certs.ParseBundle(goldenBundle, data, testutil.Epoch)
			if err != nil {
				return nil, err
			}

			return b.Marshal()
		}},
		{goldenControlPlane, func(data []byte) ([]byte, error) {
			c, err := certs.ParseMachineConfig(goldenControlPlane, data, testutil.Epoch)
			if err != nil {
				return nil, err
			}

			if c.OSCA() == nil || !c.Machine.Type.IsControlPlane() {
				t.Error("control plane config has no usable OS CA")
			}

			return c.Marshal()
		}},
		{goldenWorker, func(data []byte) ([]byte, error) {
			c, err := certs.ParseMachineConfig(goldenWorker, data, testutil.Epoch)
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

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}

	return b
}
