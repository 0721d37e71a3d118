package archtest

import (
	"path/filepath"
	"testing"
)

// TestArchitecture holds the module to docs/architecture.md.
func TestArchitecture(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}

	rep, err := Check(root, filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name  string
		found []Violation
	}{
		{"imports", rep.Imports},
		{"status", rep.Status},
		{"logkeys", rep.LogKeys},
		{"defaults", rep.Defaults},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range c.found {
				t.Error(v)
			}
		})
	}
}
