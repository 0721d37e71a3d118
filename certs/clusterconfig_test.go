package certs_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestGenerateClusterConfigs(t *testing.T) {
	b, err := certs.GenerateBundle(certs.BundleOptions{Clock: catest.FixedClock(testutil.Epoch)})
	if err != nil {
		t.Fatal(err)
	}

	opts := certs.ConfigOptions{ClusterName: "demo", Endpoint: "127.5.0.2", TimeServers: []string{"pool.example"}, TrustHostClock: true}

	set, err := certs.GenerateClusterConfigs(b, opts, 720*time.Hour, testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	if len(set.ControlPlane.Machine.CA.Key) == 0 || len(set.Worker.Machine.CA.Key) != 0 {
		t.Error("the control plane must hold the OS CA's key, the worker must not")
	}

	if servers := set.Worker.Machine.Time.Servers; len(servers) != 0 || !set.Worker.Machine.Time.TrustHostClock {
		t.Errorf("time servers %v with the host clock trusted: want none", servers)
	}

	name, ctx, err := set.Client.Current()
	if err != nil || name != "demo" || !slices.Equal(ctx.Endpoints, []string{"127.5.0.2"}) {
		t.Fatalf("client context %q %v: %v", name, ctx, err)
	}

	cert, err := ca.ParseCertificate(ctx.Crt)
	if err != nil {
		t.Fatal(err)
	}

	if got := cert.NotAfter.Sub(testutil.Epoch); got < 719*time.Hour || got > 721*time.Hour {
		t.Errorf("client certificate lives %s, want 720h", got)
	}

	if !slices.Equal(cert.Subject.Organization, []string{"os:admin"}) || cert.Subject.CommonName != "admin" {
		t.Errorf("client certificate subject %v", cert.Subject)
	}

	for _, withSecrets := range []bool{false, true} {
		set.Secrets = nil
		if withSecrets {
			set.Secrets = b
		}

		files, err := set.Files("out")
		if err != nil {
			t.Fatal(err)
		}

		want := []string{"out/controlplane.yaml", "out/worker.yaml", "out/aegisconfig"}
		if withSecrets {
			want = append(want, "out/secrets.yaml")
		}

		var names []string

		for _, f := range files {
			names = append(names, filepath.ToSlash(f.Name))

			if f.Mode != 0o600 || len(f.Data) == 0 {
				t.Errorf("%s: mode %o, %d bytes", f.Name, f.Mode, len(f.Data))
			}
		}

		if !slices.Equal(names, want) {
			t.Errorf("files %v, want %v", names, want)
		}
	}
}

func TestAdminClientConfigNeedsOSCA(t *testing.T) {
	if _, err := certs.AdminClientConfig(&certs.Bundle{}, "demo", nil, 0, testutil.Epoch); err == nil {
		t.Fatal("a bundle without an OS CA made a client config")
	}
}
