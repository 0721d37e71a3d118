package main

import (
	"bytes"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/rollout/carotation"
)

// TestCAKinds: --ca takes the OS and the etcd CA, each its own kind.
func TestCAKinds(t *testing.T) {
	kinds := caKinds()

	k, ok := kinds["etcd"]
	if !ok {
		t.Fatal("--ca etcd is not a kind")
	}

	if !k.ControlPlanesOnly || k.ClientFollows {
		t.Fatal("--ca etcd is not the etcd kind")
	}

	osKind, ok := kinds["os"]
	if !ok || osKind.ControlPlanesOnly || !osKind.ClientFollows {
		t.Fatal("--ca os is not the OS kind")
	}

	for name, kind := range kinds {
		if kind.Name != name {
			t.Errorf("--ca %s is the %s kind", name, kind.Name)
		}
	}
}

// TestPrintRotationPlan: a dry run names the CA in effect, the members,
// the steps, the workers skipped and when old client configs stop; a
// rollback names the CA it drops and no step.
func TestPrintRotationPlan(t *testing.T) {
	members := []rollout.Member{{Name: "cp-1", Addr: "10.0.0.2", Role: "controlplane"}, {Addr: "10.0.0.5", Role: "worker"}}
	p := &carotation.Plan{
		Kind: "os", InEffect: pkix.Name{CommonName: "aegis"}, Members: members, Action: carotation.Start,
		Steps:   []carotation.Step{{N: 1, Name: "accept"}, {N: 3, Name: "drop"}},
		Skipped: 2, ClientStops: true,
	}

	var out bytes.Buffer
	printRotationPlan(&out, p)

	want := "Dry run: nothing changes (add --dry-run=false to rotate).\nos CA in effect on cp-1 (10.0.0.2): CN=aegis\nmembers (2):\n" +
		"  cp-1 (10.0.0.2)\n  10.0.0.5\nwould run step 1: accept\nwould run step 3: drop\n" +
		"skipped: 2 workers, which hold no os CA\nat step 3, client configs that trust only the old CA stop working\n"
	if out.String() != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", out.String(), want)
	}

	p.Action, p.NewCA = carotation.Rollback, pkix.Name{CommonName: "aegis rotated"}
	out.Reset()
	printRotationPlan(&out, p)

	if !strings.HasSuffix(out.String(), "would roll back: drop the new CA CN=aegis rotated from every member\n") || strings.Contains(out.String(), "would run") {
		t.Fatalf("rollback plan:\n%s", out.String())
	}
}
