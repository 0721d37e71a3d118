// Package carotationtest helps the tests of a CA rotation's kinds.
package carotationtest

import (
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
)

// ApplyTwice applies an edit to a copy of cfg twice (a resumed step runs
// again) and returns the result validated; it fails t if the second edit
// changes anything.
func ApplyTwice(t *testing.T, cfg *certs.MachineConfig, edit func(*certs.MachineConfig), now time.Time) *certs.MachineConfig {
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
