package rotation_test

import (
	"errors"
	"testing"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/internal/testutil"
	rot "github.com/aegis-os/aegis/machined/rotation"
)

// TestCheck: a record names a known kind and step and holds one CA
// certificate each for the old and new CA, never a key.
func TestCheck(t *testing.T) {
	oldCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	newCA := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)
	leaf, _, err := catest.NewIssuer(t, oldCA, testutil.Epoch).IssueNewKey(ca.KeyRequest{CommonName: "leaf", Profile: ca.ProfileServer, Hosts: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}

	good := func() *rotation.Rotation {
		return &rotation.Rotation{Ca: "os", Step: rotationstate.StepAccepted, OldCa: oldCA.CertPEM, NewCa: newCA.CertPEM}
	}

	tests := []struct {
		name string
		edit func(r *rotation.Rotation)
		ok   bool
	}{
		{"good", func(*rotation.Rotation) {}, true},
		{"rolled back", func(r *rotation.Rotation) { r.Step = rotationstate.StepRolledBack }, true},
		{"the etcd CA's rotation", func(r *rotation.Rotation) { r.Ca = "etcd" }, true},
		{"unknown kind", func(r *rotation.Rotation) { r.Ca = "kubernetes" }, false},
		{"step past the end", func(r *rotation.Rotation) { r.Step = 4 }, false},
		{"a key beside the new CA", func(r *rotation.Rotation) { r.NewCa = append(r.NewCa, newCA.KeyPEM...) }, false},
		{"no old CA", func(r *rotation.Rotation) { r.OldCa = nil }, false},
		{"two certificates", func(r *rotation.Rotation) { r.NewCa = append(r.NewCa, oldCA.CertPEM...) }, false},
		{"a leaf for a CA", func(r *rotation.Rotation) { r.NewCa = leaf.PEM }, false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.edit(r)

			err := rot.Check(r, testutil.Epoch)
			if (err == nil) != tt.ok {
				t.Fatalf("Check = %v, want ok %v", err, tt.ok)
			}

			if err != nil && !errors.Is(err, rot.ErrBadRecord) {
				t.Fatalf("error %v is not ErrBadRecord", err)
			}
		})
	}

	if rotationstate.InProgress(nil) || !rotationstate.InProgress(good()) || rotationstate.InProgress(&rotation.Rotation{Step: rotationstate.StepDone}) {
		t.Fatal("InProgress misjudges")
	}
}
