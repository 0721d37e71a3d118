package main

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// TestDecide: what a run does, from the recorded rotation and the flags.
func TestDecide(t *testing.T) {
	at := func(step int32) *rotation.Rotation {
		return &rotation.Rotation{Ca: "os", Step: step, StartedBy: "O=os:admin", StartedAt: timestamppb.Now()}
	}

	tests := []struct {
		name             string
		rec              *rotation.Rotation
		resume, rollback bool
		action           rotationAction
		first            int32
		fails            bool
	}{
		{name: "none recorded: start", action: actionStart, first: rotationstate.StepAccepted},
		{name: "done: start another", rec: at(rotationstate.StepDone), action: actionStart, first: rotationstate.StepAccepted},
		{name: "rolled back: start another", rec: at(rotationstate.StepRolledBack), action: actionStart, first: rotationstate.StepAccepted},
		{name: "none recorded: nothing to resume", resume: true, fails: true},
		{name: "done: nothing to roll back", rec: at(rotationstate.StepDone), rollback: true, fails: true},
		{name: "in progress: never started over", rec: at(rotationstate.StepAccepted), fails: true},
		{name: "started: resume from step 1", rec: at(rotationstate.StepStarted), resume: true, action: actionResume, first: rotationstate.StepAccepted},
		{name: "step 1 done: resume at step 2", rec: at(rotationstate.StepAccepted), resume: true, action: actionResume, first: rotationstate.StepIssuing},
		{name: "step 2 done: resume at step 3", rec: at(rotationstate.StepIssuing), resume: true, action: actionResume, first: rotationstate.StepDone},
		{name: "step 1 done: roll back", rec: at(rotationstate.StepAccepted), rollback: true, action: actionRollback, first: rotationstate.StepRolledBack},
		{name: "step 2 done: no rollback", rec: at(rotationstate.StepIssuing), rollback: true, fails: true},
		{name: "both flags", rec: at(rotationstate.StepAccepted), resume: true, rollback: true, fails: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			action, first, err := decide(tt.rec, tt.resume, tt.rollback)
			if (err != nil) != tt.fails {
				t.Fatalf("error %v, want failure %v", err, tt.fails)
			}

			if err == nil && (action != tt.action || first != tt.first) {
				t.Fatalf("decide = %d from step %d, want %d from step %d", action, first, tt.action, tt.first)
			}
		})
	}
}

func TestStepsToRun(t *testing.T) {
	for _, tt := range []struct {
		first, until int32
		want         []int32
	}{
		{1, 0, []int32{1, 2, 3}},
		{1, 1, []int32{1}},
		{2, 2, []int32{2}},
		{3, 0, []int32{3}},
		{3, 2, nil},
		{0, 0, []int32{1, 2, 3}},
	} {
		if got := stepsToRun(tt.first, tt.until); !slices.Equal(got, tt.want) {
			t.Errorf("stepsToRun(%d, %d) = %v, want %v", tt.first, tt.until, got, tt.want)
		}
	}
}

// TestOSCAEdits walks a control plane's and a worker's config through the
// steps: each edit is idempotent and each result is a config the node
// accepts as a rotation step.
func TestOSCAEdits(t *testing.T) {
	now := time.Now()
	oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)

	for _, typ := range []certs.NodeType{certs.NodeControlPlane, certs.NodeWorker} {
		t.Run(string(typ), func(t *testing.T) {
			cfg := testMachineConfig(t, typ, oldCA, now)
			k := osCA{}

			steps := []func(c *certs.MachineConfig){
				func(c *certs.MachineConfig) { k.accept(c, newCA.Cert) },
				func(c *certs.MachineConfig) { k.issueFrom(c, newCA, oldCA.Cert) },
				func(c *certs.MachineConfig) { k.drop(c, oldCA.Cert) },
			}

			for i, step := range steps {
				next := applyTwice(t, cfg, step, now)
				if !certs.IsCARotationStep(cfg, next) {
					t.Fatalf("step %d is not a rotation step", i+1)
				}

				cfg = next
			}

			if !k.issuing(cfg).Equal(newCA.Cert) || k.accepts(cfg, oldCA.Cert) || len(cfg.AcceptedCAs().Certificates()) != 1 {
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
	k := osCA{}

	cfg := testMachineConfig(t, certs.NodeWorker, oldCA, now)
	cfg = applyTwice(t, cfg, func(c *certs.MachineConfig) { k.accept(c, newCA.Cert) }, now)
	cfg = applyTwice(t, cfg, func(c *certs.MachineConfig) { k.issueFrom(c, newCA, oldCA.Cert) }, now)

	back := applyTwice(t, cfg, func(c *certs.MachineConfig) { k.revert(c, oldCA.Cert, newCA.Cert) }, now)
	if !certs.IsCARotationStep(cfg, back) || !k.issuing(back).Equal(oldCA.Cert) || !k.accepts(back, newCA.Cert) {
		t.Fatal("the revert is not a rotation step back to the old CA")
	}
}

// applyTwice applies an edit to a copy of cfg twice (a resumed step runs
// again) and returns the result validated.
func applyTwice(t *testing.T, cfg *certs.MachineConfig, edit func(*certs.MachineConfig), now time.Time) *certs.MachineConfig {
	t.Helper()

	var once *certs.MachineConfig

	for range 2 {
		from := cfg
		if once != nil {
			from = once
		}

		c := *from
		c.Machine.AcceptedCAs = slices.Clone(from.Machine.AcceptedCAs)
		edit(&c)

		data, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		next, err := certs.ParseMachineConfig("edited", data, now)
		if err != nil {
			t.Fatal(err)
		}

		if once != nil {
			if fields, _ := certs.ChangedFields(once, next); len(fields) != 0 {
				t.Fatalf("the edit is not idempotent: %v", fields)
			}
		}

		once = next
	}

	return once
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
