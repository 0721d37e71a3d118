package talossuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPatch applies the patch to files holding exactly the text it
// replaces, and refuses a file where the text is gone.
func TestPatch(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "internal/integration/base")

	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, e := range edits {
		if err := os.WriteFile(filepath.Join(root, e.file), []byte("package base\n\nfunc f() {\n"+e.old+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if err := Patch(root); err != nil {
		t.Fatal(err)
	}

	for _, e := range edits {
		got, err := os.ReadFile(filepath.Join(root, e.file))
		if err != nil {
			t.Fatal(err)
		}

		if !strings.Contains(string(got), "aegisNodesGiven()") {
			t.Errorf("%s was not patched:\n%s", e.file, got)
		}
	}

	if _, err := os.Stat(filepath.Join(base, "aegis_discovery.go")); err != nil {
		t.Errorf("the discovery file was not added: %v", err)
	}

	// Another Talos version whose code moved: the patch refuses.
	if err := os.WriteFile(filepath.Join(root, edits[0].file), []byte("package base\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := Patch(root); err == nil || !strings.Contains(err.Error(), "0 times") {
		t.Errorf("patching moved code: %v", err)
	}
}

func TestNodesEnv(t *testing.T) {
	n := Nodes{ControlPlanes: []string{"127.9.40.2", "127.9.40.3"}, Workers: []string{"127.9.40.5"}}
	if got := n.Env(); got != "controlplane=127.9.40.2,127.9.40.3;worker=127.9.40.5" {
		t.Errorf("Env() = %q", got)
	}
}
