package main

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/inherit"
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

// TestAdoptListenersRefusesABadValue: a value that cannot be read
// refuses the start, saying what is wrong and how to start anyway.
func TestAdoptListenersRefusesABadValue(t *testing.T) {
	t.Setenv(inherit.EnvListeners, "3:127.0.0.2:50000")

	var held inherit.Set

	err := adoptListeners(&held)
	if !errors.Is(err, inherit.ErrBadValue) || !strings.Contains(err.Error(), `"3:127.0.0.2:50000" is not FD=ADDR`) ||
		!strings.Contains(err.Error(), "start machined without "+inherit.EnvListeners) {
		t.Fatalf("err = %v", err)
	}

	if _, set := os.LookupEnv(inherit.EnvListeners); set {
		t.Fatal("the value would reach the next exec")
	}
}

// TestListenersPassedOn: the sockets the node holds are named for the
// machined executed next.
func TestListenersPassedOn(t *testing.T) {
	t.Setenv(inherit.EnvListeners, "")

	var held inherit.Set
	defer held.Close()

	l, err := held.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	if err := passListeners(&held); err != nil {
		t.Fatal(err)
	}

	if v := os.Getenv(inherit.EnvListeners); !strings.HasSuffix(v, "=127.0.0.1:0") {
		t.Fatalf("%s = %q, want the socket of 127.0.0.1:0 (%s)", inherit.EnvListeners, v, l.Addr())
	}
}
