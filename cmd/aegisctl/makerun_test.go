package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// TestMakeRun: `make run` hands CIDR=, STATE_DIR= and METRICS= to the
// aegisctl commands it runs, quoted, and leaves them out when empty. The
// commands are read from `make -n`, so nothing is built or started.
func TestMakeRun(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}

	var out bytes.Buffer

	for _, vars := range [][]string{
		nil,
		{"CIDR=127.9.9.0/24", "STATE_DIR=/tmp/my clusters", "METRICS=1"},
	} {
		cmd := exec.Command("make", append([]string{"-n", "-s", "-C", "../..", "run"}, vars...)...)
		// The variables of the environment would count as given.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")

			return name == "CIDR" || name == "STATE_DIR" || name == "METRICS" || name == "NETWORK" || name == "RUNTIME" ||
				name == "CLUSTER_NAME" || name == "MAKEFLAGS"
		})

		text, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n run %v: %v", vars, err)
		}

		out.WriteString("== make run " + strings.Join(vars, " ") + "\n")

		for line := range strings.SplitSeq(string(text), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "bin/aegisctl") {
				out.WriteString(line + "\n")
			}
		}

		out.WriteString("\n")
	}

	golden.Compare(t, "make-run.golden", out.Bytes())
}
