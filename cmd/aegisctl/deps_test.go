package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/aegis-os/aegis/"

// serverTrees are the module's packages that serve (or exist only for a
// server): a client links none of them. A tree names the package and
// everything under it.
var serverTrees = []string{
	"apid", "trustd", "machined",
	"internal/connlimit", "internal/metrics", "internal/refusals", "internal/grpcrecover",
	"internal/reclaim", "internal/requestid", "internal/healthprobe", "internal/source",
}

// clientExceptions are the server-side packages the CLI may link: the
// local-cluster provisioner (`aegisctl cluster create` starts machined
// processes) and the host checks it runs first.
var clientExceptions = []string{"machined/localcluster", "machined/containerd/preflight"}

// serverImports returns the packages of deps that a client must not link:
// those in serverTrees, or authz itself (its interceptors; authz/role, the
// role names, is shared), less clientExceptions.
func serverImports(deps []string) []string {
	var bad []string

	for _, d := range deps {
		rel, ok := strings.CutPrefix(d, module)
		if !ok || slices.Contains(clientExceptions, rel) {
			continue
		}

		if rel == "authz" || slices.ContainsFunc(serverTrees, func(t string) bool { return rel == t || strings.HasPrefix(rel, t+"/") }) {
			bad = append(bad, d)
		}
	}

	return bad
}

func TestServerImports(t *testing.T) {
	deps := []string{module + "apid", module + "authz/role", module + "authz", module + "machined/localcluster",
		module + "machined/node", module + "trustdx", module + "internal/metrics", module + "client/routing", "fmt"}
	want := []string{module + "apid", module + "authz", module + "machined/node", module + "internal/metrics"}

	if got := serverImports(deps); !slices.Equal(got, want) {
		t.Fatalf("serverImports = %v, want %v", got, want)
	}
}

// TestCLILinksNoServer: aegisctl, the client-side library and the rollout
// engine reach nodes over the API only. A server package in their
// dependencies means a helper was taken from the wrong side: move it under
// client/ instead.
func TestCLILinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", module+"client/...", module+"rollout/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}

	if bad := serverImports(strings.Fields(string(out))); len(bad) > 0 {
		t.Fatalf("aegisctl, client/ or rollout/ links server packages:\n  %s\nfind the importer with: go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/aegisctl | grep <package>",
			strings.Join(bad, "\n  "))
	}
}
