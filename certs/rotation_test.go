package certs_test

import (
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

// reparse validates an edited config again, as a node does before it
// applies one.
func reparse(t *testing.T, c *certs.MachineConfig) *certs.MachineConfig {
	t.Helper()

	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	out, err := certs.ParseMachineConfig("edited", data, testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	return out
}

// TestIsCARotationStep: machine.ca may change live only to a CA the node
// already accepts, and only while the CA it replaces stays accepted.
func TestIsCARotationStep(t *testing.T) {
	base, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	oldCA := certs.CertAndKey{Crt: base.Machine.CA.Crt}
	fresh := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	freshCrt := certs.CertAndKey{Crt: fresh.CertPEM}
	swapped := certs.CertAndKey{Crt: fresh.CertPEM, Key: fresh.KeyPEM}

	edit := func(from *certs.MachineConfig, f func(c *certs.MachineConfig)) *certs.MachineConfig {
		c := *from
		c.Machine.AcceptedCAs = append([]certs.CertAndKey(nil), from.Machine.AcceptedCAs...)
		f(&c)

		return reparse(t, &c)
	}

	accepted := edit(base, func(c *certs.MachineConfig) { c.Machine.AcceptedCAs = append(c.Machine.AcceptedCAs, freshCrt) })

	tests := []struct {
		name     string
		cur, upd *certs.MachineConfig
		want     bool
	}{
		{"no change of CA", base, accepted, true},
		{"outright swap, the new CA not accepted first", base,
			edit(base, func(c *certs.MachineConfig) {
				c.Machine.CA = swapped
				c.Machine.AcceptedCAs = []certs.CertAndKey{oldCA}
			}), false},
		{"swap to an accepted CA, the old one kept", accepted,
			edit(base, func(c *certs.MachineConfig) {
				c.Machine.CA = swapped
				c.Machine.AcceptedCAs = []certs.CertAndKey{oldCA}
			}), true},
		{"swap to an accepted CA, the old one dropped", accepted,
			edit(base, func(c *certs.MachineConfig) { c.Machine.CA = swapped; c.Machine.AcceptedCAs = nil }), false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := certs.IsCARotationStep(tt.cur, tt.upd); got != tt.want {
				t.Fatalf("IsCARotationStep = %v, want %v", got, tt.want)
			}
		})
	}

	for path, want := range map[string]bool{"machine.ca": true, "machine.ca.crt": true, "machine.ca.key": true, "machine.cat": false, "machine.acceptedCAs": false} {
		if certs.IsOSCAField(path) != want {
			t.Errorf("IsOSCAField(%q) = %v", path, !want)
		}
	}
}
