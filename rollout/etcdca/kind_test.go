package etcdca

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout/carotation"
	"github.com/aegis-os/aegis/rollout/carotation/carotationtest"
)

// edit is the kind's edit e, as a function of a config.
func edit(e carotation.Edit) func(*certs.MachineConfig) {
	return func(c *certs.MachineConfig) { Config{}.Edit(c, e) }
}

// TestEtcdCAEdits walks a control plane's config through the steps with
// the etcd kind: each edit is idempotent, passes the check the step makes
// of it and is a change a node accepts (the etcd CA changes only as step 2
// does); step 1 again after step 2, as a resumed rotation runs it, changes
// nothing; the OS CA is never touched.
func TestEtcdCAEdits(t *testing.T) {
	now := time.Now()
	osCA, oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.ECDSAP256, now), catest.NewCA(t, ca.ECDSAP256, now)
	k := Config{}
	cfg := etcdMachineConfig(t, osCA, oldCA, now)
	start := cfg
	accept := carotation.Edit{Change: carotation.Accept, New: carotation.CertOnly(newCA.Cert)}

	steps := []struct {
		edit  carotation.Edit
		check func(c *certs.MachineConfig) bool
	}{
		{accept, func(c *certs.MachineConfig) bool {
			return k.Accepts(c, newCA.Cert) && k.Issuing(c).Equal(oldCA.Cert)
		}},
		{carotation.Edit{Change: carotation.Issue, New: newCA, Old: oldCA.Cert}, func(c *certs.MachineConfig) bool {
			return k.Issuing(c).Equal(newCA.Cert) && k.Accepts(c, oldCA.Cert) && k.Held(c).Cert.Equal(newCA.Cert)
		}},
		{accept, func(c *certs.MachineConfig) bool {
			return len(c.Cluster.Etcd.AcceptedCAs) == 1 // step 1 again: only the old CA stays accepted
		}},
		{carotation.Edit{Change: carotation.Drop, Old: oldCA.Cert}, func(c *certs.MachineConfig) bool {
			return !k.Accepts(c, oldCA.Cert) && len(c.EtcdTrustedCAs()) == 1
		}},
	}

	for i, step := range steps {
		next := carotationtest.ApplyTwice(t, cfg, edit(step.edit), now)
		if err := certs.CheckEtcdCAChange(cfg, next); err != nil {
			t.Fatalf("edit %d: %v", i+1, err)
		}

		if !step.check(next) {
			t.Fatalf("edit %d does not pass its check", i+1)
		}

		if !next.OSCA().Cert.Equal(start.OSCA().Cert) || len(next.Machine.AcceptedCAs) != 0 {
			t.Fatalf("edit %d changed the OS CA", i+1)
		}

		cfg = next
	}
}

// TestEtcdCARollbackEdit: dropping the new CA after step 1 gives back the
// config the rotation started from.
func TestEtcdCARollbackEdit(t *testing.T) {
	now := time.Now()
	osCA, oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.ECDSAP256, now), catest.NewCA(t, ca.ECDSAP256, now)
	start := etcdMachineConfig(t, osCA, oldCA, now)

	accepted := carotationtest.ApplyTwice(t, start, edit(carotation.Edit{Change: carotation.Accept, New: carotation.CertOnly(newCA.Cert)}), now)
	back := carotationtest.ApplyTwice(t, accepted, edit(carotation.Edit{Change: carotation.Drop, Old: newCA.Cert}), now)

	if fields, err := certs.ChangedFields(start, back); err != nil || len(fields) != 0 {
		t.Fatalf("the rollback left %v changed (%v)", fields, err)
	}

	if (Config{}).Accepts(back, newCA.Cert) {
		t.Fatal("the rollback still accepts the new CA")
	}
}

// TestEtcdCAKind: the etcd kind changes control planes only, keeps no
// client config and names its own steps; its record is its own.
func TestEtcdCAKind(t *testing.T) {
	k := Kind()

	if !k.ControlPlanesOnly {
		t.Fatal("the etcd kind does not hold to control planes only")
	}

	if k.ClientFollows {
		t.Fatal("only the OS CA issues the client config")
	}

	if !strings.Contains(k.StepName(rotationstate.StepDone), "etcd") || strings.Contains(k.StepName(rotationstate.StepIssuing), "client config") {
		t.Fatalf("etcd steps named %q, %q", k.StepName(rotationstate.StepIssuing), k.StepName(rotationstate.StepDone))
	}

	if !slices.Contains(rotationstate.Kinds(), k.Name) {
		t.Fatalf("the rotation service records no %q kind: %v", k.Name, rotationstate.Kinds())
	}

	b := &certs.Bundle{Certs: &certs.BundleCerts{}}
	if k.Config.Bundled(b) != &b.Certs.Etcd {
		t.Fatal("a kind's CA is kept in another field of the secrets bundle")
	}
}

// etcdMachineConfig is a control plane's config with etcd CA etcd.
func etcdMachineConfig(t *testing.T, osAuthority, etcd *ca.CA, now time.Time) *certs.MachineConfig {
	t.Helper()

	c := &certs.MachineConfig{
		Version: certs.MachineConfigVersion,
		Machine: certs.MachineSpec{
			Type: certs.NodeControlPlane, Token: "abcdef.0123456789abcdef",
			CA:   certs.CertAndKey{Crt: osAuthority.CertPEM, Key: osAuthority.KeyPEM},
			Time: certs.TimeSpec{TrustHostClock: true},
		},
		Cluster: certs.ClusterSpec{
			Name: "test", ControlPlane: certs.ControlPlaneSpec{Endpoints: []string{"127.0.0.2"}},
			Etcd: certs.EtcdSpec{CA: &certs.CertAndKey{Crt: etcd.CertPEM, Key: etcd.KeyPEM}},
		},
	}

	if err := c.Validate("test", now); err != nil {
		t.Fatal(err)
	}

	return c
}
