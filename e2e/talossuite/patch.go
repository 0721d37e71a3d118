package talossuite

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NodesEnv is the environment variable that gives Talos's suite its nodes:
// "controlplane=ADDR,ADDR;worker=ADDR,ADDR". It is the one thing the patch
// adds to Talos's source; test bodies stay as they are.
const NodesEnv = "AEGIS_TALOS_NODES"

// discoveryFile is added to Talos's internal/integration/base: the node
// list from NodesEnv, the third discovery source next to a provisioner's
// state and Kubernetes.
const discoveryFile = `//go:build integration

package base

import (
	"os"
	"strings"

	"github.com/siderolabs/talos/pkg/cluster"
)

// Added by Aegis's talos-suite: nodes and their roles from the environment.
const aegisNodesEnv = "` + NodesEnv + `"

// aegisNodesGiven tells whether the node list comes from the environment.
func aegisNodesGiven() bool { return os.Getenv(aegisNodesEnv) != "" }

// aegisDiscoverNodes parses "controlplane=A,B;worker=C" from the environment.
func aegisDiscoverNodes() cluster.Info {
	var controlPlanes, workers []string

	for _, group := range strings.Split(os.Getenv(aegisNodesEnv), ";") {
		role, list, _ := strings.Cut(group, "=")

		var addrs []string

		for _, a := range strings.Split(list, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}

		switch strings.TrimSpace(role) {
		case "controlplane":
			controlPlanes = append(controlPlanes, addrs...)
		case "worker":
			workers = append(workers, addrs...)
		}
	}

	info, err := newNodeInfo(controlPlanes, workers)
	if err != nil {
		panic(aegisNodesEnv + ": " + err.Error())
	}

	return info
}
`

// edit is one exact replacement in a file of Talos's source.
type edit struct {
	file, old, new string
}

// edits hook the discovery file in: TalosSuite.DiscoverNodes takes the list
// when no provisioner state is given, and K8sSuite.SetupSuite leaves its
// Kubernetes clients unset when the nodes did not come from Kubernetes, so
// the suites that embed it for their etcd or API tests (EtcdSuite,
// EtcdRecoverSuite) run; a test that does use Kubernetes is on the skip
// list.
var edits = []edit{
	{
		file: "internal/integration/base/base.go",
		old: `		if talosSuite.Cluster != nil {
			talosSuite.discoveredNodes = access.NewAdapter(talosSuite.Cluster).Info
		}`,
		new: `		if talosSuite.Cluster != nil {
			talosSuite.discoveredNodes = access.NewAdapter(talosSuite.Cluster).Info
		} else if aegisNodesGiven() {
			talosSuite.discoveredNodes = aegisDiscoverNodes()
		}`,
	},
	{
		file: "internal/integration/base/k8s.go",
		old: `	k8sSuite.APISuite.SetupSuite()
`,
		new: `	k8sSuite.APISuite.SetupSuite()

	if aegisNodesGiven() {
		return
	}
`,
	},
}

// PatchID identifies the patch, so that a cached build made with another
// patch is rebuilt.
func PatchID() string {
	h := sha256.New()
	h.Write([]byte(discoveryFile))

	for _, e := range edits {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", e.file, e.old, e.new)
	}

	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Patch applies the node-discovery patch to Talos's source at root. Each
// edit must find its text exactly once: a Talos version whose code moved
// fails here instead of building a suite that discovers nothing.
func Patch(root string) error {
	for _, e := range edits {
		path := filepath.Join(root, e.file)

		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("talossuite: patch: %w", err)
		}

		if n := bytes.Count(src, []byte(e.old)); n != 1 {
			return fmt.Errorf("talossuite: patch: %s has the text to replace %d times, want once (another Talos version?): %q",
				e.file, n, strings.SplitN(e.old, "\n", 2)[0])
		}

		src = bytes.Replace(src, []byte(e.old), []byte(e.new), 1)

		if err := os.WriteFile(path, src, 0o644); err != nil { //nolint:gosec // source code
			return fmt.Errorf("talossuite: patch: %w", err)
		}
	}

	path := filepath.Join(root, "internal/integration/base/aegis_discovery.go")
	if err := os.WriteFile(path, []byte(discoveryFile), 0o644); err != nil { //nolint:gosec // source code
		return fmt.Errorf("talossuite: patch: %w", err)
	}

	return nil
}
