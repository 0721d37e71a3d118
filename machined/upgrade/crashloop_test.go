package upgrade

import (
	"strings"
	"testing"
	"time"
)

// TestCrashLoop: a service that exits CrashLoopExits times in a row
// without coming up gives the reason to go back, naming it; coming up in
// between starts its count again; services are counted apart.
func TestCrashLoop(t *testing.T) {
	var c CrashLoop

	for range CrashLoopExits - 1 {
		if r := c.Exited("v0.2.0", "apid", "exited; restarting in 1s"); r != "" {
			t.Fatalf("gave up early: %s", r)
		}
	}

	c.Up("apid")

	if r := c.Exited("v0.2.0", "trustd", "exited; restarting in 1s"); r != "" {
		t.Fatalf("another service's exits counted: %s", r)
	}

	var reason string
	for range CrashLoopExits {
		reason = c.Exited("v0.2.0", "apid", "exit status 1; restarting in 4s")
	}

	for _, want := range []string{"v0.2.0", "apid", "3 times in a row", "exit status 1; restarting in 4s"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q lacks %q", reason, want)
		}
	}
}

// TestGiveUp: a version on trial goes back to the kept one at once, for
// the reason given, and keeps nothing to roll back to; with no trial,
// nothing changes.
func TestGiveUp(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s := State{
		Active:   Slot{Name: "a", Version: "v0.2.0"},
		Previous: &Slot{Name: "b", Version: "v0.1.0"},
		Trial:    &Trial{Since: now, Deadline: now.Add(TrialTimeout)},
	}

	rolled, ok := GiveUp(s, now.Add(time.Second), "v0.2.0: service apid exited 3 times in a row")
	if !ok || rolled.Active.Version != "v0.1.0" || rolled.Trial != nil || rolled.Previous != nil ||
		rolled.LastRollback == nil || !rolled.LastRollback.ByNode || !strings.Contains(rolled.LastRollback.Reason, "apid exited") ||
		!rolled.LastRollback.At.Equal(now.Add(time.Second)) || rolled.LastRollback.From != "v0.2.0" || rolled.LastRollback.To != "v0.1.0" {
		t.Fatalf("GiveUp = %+v, %v", rolled, ok)
	}

	if same, ok := GiveUp(rolled, now, "again"); ok || same.Active.Version != "v0.1.0" {
		t.Fatalf("GiveUp without a trial = %+v, %v", same, ok)
	}
}
