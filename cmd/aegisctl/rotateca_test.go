package main

import (
	"testing"
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
