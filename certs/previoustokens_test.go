package certs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

const (
	prevA = "prevaa.aaaaaaaaaaaaaaaa"
	prevB = "prevbb.bbbbbbbbbbbbbbbb"
)

func controlPlane(t *testing.T) *certs.MachineConfig {
	t.Helper()

	cfg, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	return cfg
}

// problemPaths validates cfg at now and returns the paths of its problems.
func problemPaths(t *testing.T, cfg *certs.MachineConfig, now time.Time) []string {
	t.Helper()

	err := cfg.Validate("cfg", now)
	if err == nil {
		return nil
	}

	var v *certs.ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("not a validation error: %v", err)
	}

	var paths []string
	for _, p := range v.Problems {
		paths = append(paths, p.Path)
	}

	return paths
}

func TestPreviousTokensValidation(t *testing.T) {
	now := testutil.Epoch
	soon := now.Add(time.Hour)
	many := make([]certs.PreviousToken, certs.MaxPreviousTokens+1)

	for i := range many {
		many[i] = certs.PreviousToken{Token: "prev" + string(rune('a'+i)) + "0.aaaaaaaaaaaaaaaa", Expires: soon}
	}

	tests := []struct {
		name   string
		worker bool
		prev   []certs.PreviousToken
		paths  []string
	}{
		{name: "two fine, one expired", prev: []certs.PreviousToken{{prevA, soon}, {prevB, now.Add(-time.Hour)}}},
		{name: "malformed and missing expiry", prev: []certs.PreviousToken{{"nope", soon}, {prevB, time.Time{}}},
			paths: []string{"machine.previousTokens[0].token", "machine.previousTokens[1].expires"}},
		{name: "the current token, a duplicate", prev: []certs.PreviousToken{{"", soon}, {prevA, soon}, {prevA, soon}},
			paths: []string{"machine.previousTokens[0].token", "machine.previousTokens[2].token"}},
		{name: "too far ahead", prev: []certs.PreviousToken{{prevA, now.Add(certs.MaxPreviousTokenLife + time.Second)}},
			paths: []string{"machine.previousTokens[0].expires"}},
		{name: "too many", prev: many, paths: []string{"machine.previousTokens"}},
		{name: "on a worker", worker: true, prev: []certs.PreviousToken{{prevA, soon}}, paths: []string{"machine.previousTokens"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := controlPlane(t)

			if tt.worker {
				var err error
				if cfg, err = certs.ParseMachineConfig("w.yaml", []byte(readGolden(t, goldenWorker)), now); err != nil {
					t.Fatal(err)
				}
			}

			for i := range tt.prev {
				if tt.prev[i].Token == "" {
					tt.prev[i].Token = cfg.Machine.Token
				}
			}

			cfg.Machine.PreviousTokens = tt.prev

			if got := problemPaths(t, cfg, now); !slices.Equal(got, tt.paths) {
				t.Fatalf("problems at %v, want %v", got, tt.paths)
			}

			if tt.paths == nil && len(cfg.PreviousTrustdTokens()) != len(tt.prev) {
				t.Fatalf("parsed %d previous tokens, want %d", len(cfg.PreviousTrustdTokens()), len(tt.prev))
			}
		})
	}
}

// TestPreviousTokensExpiry: a config applied may keep an entry the node
// holds although it has expired since, but adds none already expired.
func TestPreviousTokensExpiry(t *testing.T) {
	now := testutil.Epoch
	past := now.Add(-time.Minute)

	cur := controlPlane(t)
	cur.Machine.PreviousTokens = []certs.PreviousToken{{Token: prevA, Expires: past}}

	applied := controlPlane(t)
	applied.Machine.PreviousTokens = []certs.PreviousToken{{Token: prevA, Expires: past}, {Token: prevB, Expires: now.Add(time.Hour)}}

	if err := applied.CheckPreviousTokensExpiry("new", cur, now); err != nil {
		t.Fatalf("an entry held as it is: %v", err)
	}

	applied.Machine.PreviousTokens = []certs.PreviousToken{{Token: prevB, Expires: past}, {Token: prevA, Expires: now}}

	err := applied.CheckPreviousTokensExpiry("new", cur, now)
	if err == nil || !strings.Contains(err.Error(), "machine.previousTokens[0].expires") ||
		!strings.Contains(err.Error(), "machine.previousTokens[1].expires") {
		t.Fatalf("new expired entries: %v", err)
	}
}

func TestPreviousTokensRedactedAndLive(t *testing.T) {
	cfg := controlPlane(t)
	cfg.Machine.PreviousTokens = []certs.PreviousToken{{Token: prevA, Expires: testutil.Epoch.Add(time.Hour)}}

	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}

	if strings.Contains(string(out), prevA) || !strings.Contains(string(out), "previousTokens") {
		t.Fatalf("redacted config:\n%s", out)
	}

	if c := certs.ClassOf("machine.previousTokens"); c != certs.ChangeLive {
		t.Fatalf("machine.previousTokens is of class %d, want live", c)
	}
}
