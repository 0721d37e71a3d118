package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/health"
	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// TestDocuments: -o json and -o yaml of the commands whose output is not an
// API reply, against golden files.
func TestDocuments(t *testing.T) {
	dir := t.TempDir()

	// config info reads a client config with fixed certificates, copied
	// at 0600: git checks it out readable by all, which aegisctl warns of.
	fixed, err := os.ReadFile(filepath.Join("..", "..", "certs", "testdata", "aegisconfig"))
	if err != nil {
		t.Fatal(err)
	}

	info := filepath.Join(dir, "info")
	if err = os.WriteFile(info, fixed, 0o600); err != nil {
		t.Fatal(err)
	}

	contexts := filepath.Join(dir, "contexts")
	c := &certs.ClientConfig{Context: "beta", Contexts: map[string]*certs.ClientContext{
		"alpha": {Endpoints: []string{"10.0.0.1", "10.0.0.2"}, Nodes: []string{"10.0.0.5"}},
		"beta":  {Endpoints: []string{"127.5.0.2"}},
	}}
	if err = c.Save(contexts); err != nil {
		t.Fatal(err)
	}

	manifest := `{"name": "demo", "dir": "/var/lib/aegis/clusters/demo", "nodes": [
		{"name": "demo-controlplane-1", "type": "controlplane", "address": "127.5.0.2", "pid": 0},
		{"name": "demo-worker-1", "type": "worker", "address": "127.5.0.3", "pid": 0}]}`
	if err = os.MkdirAll(filepath.Join(dir, "state", "demo"), 0o700); err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(filepath.Join(dir, "state", "demo", "cluster.json"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}

	lab := `{"name": "lab", "dir": "/var/lib/aegis/clusters/lab", "nodes": [
		{"name": "lab-controlplane-1", "type": "controlplane", "address": "10.213.0.2", "pid": 0}],
		"net": {"prefix": "aegis-lab", "bridge": "aegis-lab-br", "gateway": "10.213.0.1/24"}}`
	if err = os.MkdirAll(filepath.Join(dir, "state", "lab"), 0o700); err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(filepath.Join(dir, "state", "lab", "cluster.json"), []byte(lab), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, format := range []string{"json", "yaml"} {
		for name, args := range map[string][]string{
			"contexts":           {"--aegisconfig", contexts, "config", "contexts"},
			"config-info":        {"--aegisconfig", info, "config", "info"},
			"cluster-show":       {"cluster", "show", "--name", "demo", "--state-dir", filepath.Join(dir, "state")},
			"cluster-show-netns": {"cluster", "show", "--name", "lab", "--state-dir", filepath.Join(dir, "state")},
		} {
			t.Run(name+"."+format, func(t *testing.T) {
				golden.Compare(t, name+"."+format+".golden", []byte(mustRun(t, dir, append(args, "-o", format)...)))
			})
		}

		t.Run("health."+format, func(t *testing.T) {
			round := health.Round{"127.5.0.2": "", "127.5.0.3": "trustd is Waiting; apid has not passed its health check yet"}

			var out bytes.Buffer
			if err := writeDocument(&out, outputFormat(format), healthDocument(round)); err != nil {
				t.Fatal(err)
			}

			golden.Compare(t, "health."+format+".golden", out.Bytes())
		})
	}

	if _, err := run(t, dir, "--aegisconfig", contexts, "config", "contexts", "-o", "xml"); err == nil {
		t.Fatal("-o xml accepted")
	}
}
