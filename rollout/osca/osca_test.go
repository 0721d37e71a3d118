package osca

import (
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout/carotation"
	"github.com/aegis-os/aegis/rollout/carotation/carotationtest"
)

// TestOSCAEdits walks a control plane's and a worker's config through the
// steps: each edit is idempotent and each result is a config the node
// accepts as a rotation step.
func TestOSCAEdits(t *testing.T) {
	now := time.Now()
	oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)

	for _, typ := range []certs.NodeType{certs.NodeControlPlane, certs.NodeWorker} {
		t.Run(string(typ), func(t *testing.T) {
			cfg := testMachineConfig(t, typ, oldCA, now)
			k := Config{}

			steps := []carotation.Edit{
				{Change: carotation.Accept, New: carotation.CertOnly(newCA.Cert)},
				{Change: carotation.Issue, New: newCA, Old: oldCA.Cert},
				{Change: carotation.Drop, Old: oldCA.Cert},
			}

			for i, step := range steps {
				next := carotationtest.ApplyTwice(t, cfg, func(c *certs.MachineConfig) { k.Edit(c, step) }, now)
				if !certs.IsCARotationStep(cfg, next) {
					t.Fatalf("step %d is not a rotation step", i+1)
				}

				cfg = next
			}

			if !k.Issuing(cfg).Equal(newCA.Cert) || k.Accepts(cfg, oldCA.Cert) || len(cfg.AcceptedCAs().Certificates()) != 1 {
				t.Fatal("after step 3 the config does not hold the new CA alone")
			}

			if (cfg.OSCA() != nil) != typ.IsControlPlane() {
				t.Fatal("the CA key went where it does not belong")
			}
		})
	}
}

// TestOSCARevert: a worker left issuing from the new CA by an interrupted
// step 2 goes back to the old one, still accepting the new, as a
// rotation step.
func TestOSCARevert(t *testing.T) {
	now := time.Now()
	oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)
	k := Config{}
	edit := func(e carotation.Edit) func(*certs.MachineConfig) {
		return func(c *certs.MachineConfig) { k.Edit(c, e) }
	}

	cfg := testMachineConfig(t, certs.NodeWorker, oldCA, now)
	cfg = carotationtest.ApplyTwice(t, cfg, edit(carotation.Edit{Change: carotation.Accept, New: carotation.CertOnly(newCA.Cert)}), now)
	cfg = carotationtest.ApplyTwice(t, cfg, edit(carotation.Edit{Change: carotation.Issue, New: newCA, Old: oldCA.Cert}), now)

	back := carotationtest.ApplyTwice(t, cfg, edit(carotation.Edit{Change: carotation.Revert, Old: oldCA.Cert, New: carotation.CertOnly(newCA.Cert)}), now)
	if !certs.IsCARotationStep(cfg, back) || !k.Issuing(back).Equal(oldCA.Cert) || !k.Accepts(back, newCA.Cert) {
		t.Fatal("the revert is not a rotation step back to the old CA")
	}
}

// TestOSKind: the OS kind changes every member and keeps the client
// config; its CA is the bundle's OS CA.
func TestOSKind(t *testing.T) {
	k := Kind()
	if k.ControlPlanesOnly || !k.ClientFollows || k.Name != "os" || k.Verify != nil {
		t.Fatalf("the OS kind is %+v", k)
	}

	b := &certs.Bundle{Certs: &certs.BundleCerts{}}
	if k.Config.Bundled(b) != &b.Certs.OS {
		t.Fatal("the OS CA is kept in another field of the secrets bundle")
	}
}

func testMachineConfig(t *testing.T, typ certs.NodeType, authority *ca.CA, now time.Time) *certs.MachineConfig {
	t.Helper()

	pair := certs.CertAndKey{Crt: authority.CertPEM}
	if typ.IsControlPlane() {
		pair.Key = authority.KeyPEM
	}

	c := &certs.MachineConfig{
		Version: certs.MachineConfigVersion,
		Machine: certs.MachineSpec{
			Type: typ, Token: "abcdef.0123456789abcdef", CA: pair,
			Time: certs.TimeSpec{TrustHostClock: true},
		},
		Cluster: certs.ClusterSpec{Name: "test", ControlPlane: certs.ControlPlaneSpec{Endpoints: []string{"127.0.0.2"}}},
	}

	if typ.IsControlPlane() {
		c.Cluster.Etcd.Disabled = true // not what a rotation of the OS CA changes
	}

	if err := c.Validate("test", now); err != nil {
		t.Fatal(err)
	}

	return c
}
