package main

import (
	"slices"
	"testing"

	"github.com/aegis-os/aegis/machined/upgrade"
)

func TestWithoutDirFlags(t *testing.T) {
	in := []string{"--config", "c.yaml", "--bin-dir", "/old", "-image-dir=/img", "--state=/s", "--bin-dir=/older", "--log-level", "debug"}
	want := []string{"--config", "c.yaml", "--state=/s", "--log-level", "debug"}

	if got := withoutDirFlags(in); !slices.Equal(got, want) {
		t.Fatalf("withoutDirFlags = %q, want %q", got, want)
	}
}

func TestDecisionFromEnv(t *testing.T) {
	t.Setenv(envDecision, "3\tv0.3.0 was not healthy within 2m0s")

	d, ok := decisionFromEnv()
	if !ok || d.Outcome != upgrade.RolledBack || d.Reason != "v0.3.0 was not healthy within 2m0s" {
		t.Fatalf("%+v %v", d, ok)
	}
}
