// Package compat_test checks that Aegis's files and Talos's tools read each
// other's output, with Talos's own machinery packages as the other side.
package compat_test

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	talosrole "github.com/siderolabs/talos/pkg/machinery/role"
	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

// TestTalosLoadsAegisBundle: Talos's own loader reads a bundle Aegis
// generated, validates it, and sees the same OS CA.
func TestTalosLoadsAegisBundle(t *testing.T) {
	b, err := certs.GenerateBundle(certs.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "secrets.yaml")
	if err := b.Save(path, false); err != nil {
		t.Fatal(err)
	}

	tb, err := secrets.LoadBundle(path)
	if err != nil {
		t.Fatalf("Talos cannot load the Aegis bundle: %v", err)
	}

	if err := tb.Validate(); err != nil {
		t.Fatalf("Talos finds the Aegis bundle invalid: %v", err)
	}

	if !bytes.Equal(tb.Certs.OS.Crt, b.Certs.OS.Crt) || tb.TrustdInfo.Token != b.TrustdInfo.Token || tb.Cluster.ID != b.Cluster.ID {
		t.Fatal("Talos read different values")
	}

	// Talos can issue its admin certificate from the Aegis OS CA.
	if _, err := tb.GenerateTalosAPIClientCertificate(talosrole.MakeSet(talosrole.Admin)); err != nil {
		t.Fatalf("Talos cannot issue from the Aegis OS CA: %v", err)
	}
}

// TestAegisLoadsTalosBundle: a bundle made by Talos's generator loads, validates
// and issues through Aegis.
func TestAegisLoadsTalosBundle(t *testing.T) {
	tb, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	data, err := yaml.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()

	b, err := certs.ParseBundle("talos secrets.yaml", data, now)
	if err != nil {
		t.Fatalf("Aegis cannot load the Talos bundle: %v", err)
	}

	osCA, err := b.OSCA(now)
	if err != nil {
		t.Fatal(err)
	}

	cc, err := certs.NewClientCertificate(catest.NewIssuer(t, osCA, now), certs.ClientCertOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := verifyClient(osCA, cc, now); err != nil {
		t.Fatal(err)
	}

	// The Talos layout survives an Aegis round trip.
	out, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	var again secrets.Bundle
	if err := yaml.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}

	if err := again.Validate(); err != nil {
		t.Fatalf("Talos rejects the re-encoded bundle: %v", err)
	}
}

// TestTalosReadsAegisClientConfig: the machinery client/config package reads
// an Aegis client config and gets the same context and credentials.
func TestTalosReadsAegisClientConfig(t *testing.T) {
	data, err := os.ReadFile(goldenClient)
	if err != nil {
		t.Fatal(err)
	}

	ours, err := certs.ParseClientConfig(goldenClient, data)
	if err != nil {
		t.Fatal(err)
	}

	theirs, err := talosconfig.FromBytes(data)
	if err != nil {
		t.Fatalf("Talos cannot read the Aegis client config: %v", err)
	}

	tc, ok := theirs.Contexts[theirs.Context]
	if !ok || theirs.Context != ours.Context {
		t.Fatalf("Talos sees current context %q", theirs.Context)
	}

	oc := ours.Contexts[ours.Context]
	if tc.CA != b64(oc.CA) || tc.Crt != b64(oc.Crt) || tc.Key != b64(oc.Key) || len(tc.Endpoints) != len(oc.Endpoints) || len(tc.Nodes) != len(oc.Nodes) {
		t.Fatal("Talos reads different credentials or endpoints")
	}

	// And a talosconfig written by Talos loads in Aegis.
	theirs.Contexts["other"] = &talosconfig.Context{Endpoints: []string{"10.0.0.1"}, CA: tc.CA, Crt: tc.Crt, Key: tc.Key}

	out, err := theirs.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	back, err := certs.ParseClientConfig("talosconfig", out)
	if err != nil {
		t.Fatalf("Aegis cannot read a talosconfig: %v", err)
	}

	if len(back.Contexts) != 2 {
		t.Fatalf("contexts = %d", len(back.Contexts))
	}
}

func verifyClient(osCA *ca.CA, cc *certs.ClientCertificate, now time.Time) error {
	set, err := ca.NewAcceptedSet(now, osCA.Cert)
	if err != nil {
		return err
	}

	if err := set.Verify(cc.Cert.Cert, x509.ExtKeyUsageClientAuth, now); err != nil {
		return err
	}

	if got, _ := role.FromOrganization(cc.Cert.Cert.Subject.Organization); !got.Has(role.Admin) {
		return os.ErrInvalid
	}

	return nil
}

const goldenClient = "../testdata/aegisconfig"

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
