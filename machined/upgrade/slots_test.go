package upgrade

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

var (
	installed = Slot{Name: InstalledSlot, BinDir: "/usr/bin", Version: "v0.2.0"}
	slotA     = Slot{Name: "a", BinDir: "/s/a/bin", Version: "v0.3.0"}
)

func staged(t *testing.T) State {
	t.Helper()

	s, err := Stage(State{Active: installed}, slotA)
	if err != nil {
		t.Fatal(err)
	}

	return s
}

func TestStartPromotesThenConfirms(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))

	s, d := Start(staged(t), clk.Now(), time.Minute)
	if d.Outcome != Promoted || s.Active != slotA || s.Previous == nil || *s.Previous != installed || s.Staged != nil {
		t.Fatalf("after promotion: %+v %+v", s, d)
	}

	if s.Trial == nil || s.Trial.Starts != 1 || !s.Trial.Deadline.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("trial %+v", s.Trial)
	}

	if _, err := Stage(s, Slot{Name: "b"}); !errors.Is(err, ErrOnTrial) {
		t.Fatalf("Stage during a trial: %v", err)
	}

	clk.Advance(30 * time.Second)

	if _, _, expired := Expire(s, clk.Now()); expired {
		t.Fatal("expired before the deadline")
	}

	s = Confirm(s)

	clk.Advance(time.Hour)

	if _, _, expired := Expire(s, clk.Now()); expired {
		t.Fatal("a confirmed version expired")
	}

	if s2, d := Start(s, clk.Now(), time.Minute); d.Outcome != Unchanged || s2.Active != slotA {
		t.Fatalf("start after confirmation: %+v %+v", s2, d)
	}
}

func TestTrialExpiresWhileRunning(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s, _ := Start(staged(t), clk.Now(), time.Minute)

	clk.Advance(time.Minute)

	rolled, reason, expired := Expire(s, clk.Now())
	if !expired || rolled.Active != installed || rolled.Previous != nil || rolled.Trial != nil {
		t.Fatalf("at the deadline: %+v %v", rolled, expired)
	}

	want := Rollback{At: clk.Now(), From: "v0.3.0", To: "v0.2.0", Reason: reason, ByNode: true}
	if !strings.Contains(reason, "v0.3.0 was not healthy within 1m0s") || rolled.LastRollback == nil || *rolled.LastRollback != want {
		t.Fatalf("reason %q, recorded %+v, want %+v", reason, rolled.LastRollback, want)
	}
}

func TestTrialRunsOutOfStarts(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s, _ := Start(staged(t), clk.Now(), time.Hour)

	for i := 2; i <= MaxTrialStarts; i++ {
		clk.Advance(time.Second)

		var d Decision
		if s, d = Start(s, clk.Now(), time.Hour); d.Outcome != OnTrial || s.Trial.Starts != i {
			t.Fatalf("start %d: %+v %+v", i, s, d)
		}
	}

	s, d := Start(s, clk.Now(), time.Hour)
	if d.Outcome != RolledBack || s.Active != installed || s.Trial != nil {
		t.Fatalf("start %d: %+v %+v", MaxTrialStarts+1, s, d)
	}

	if !strings.Contains(d.Reason, "started 3 times without becoming healthy") {
		t.Fatalf("reason %q", d.Reason)
	}
}

func TestStartAfterDeadlineRollsBack(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	s, _ := Start(staged(t), clk.Now(), time.Minute)

	// machined was down across the deadline.
	clk.Advance(2 * time.Minute)

	if s, d := Start(s, clk.Now(), time.Minute); d.Outcome != RolledBack || s.Active != installed {
		t.Fatalf("%+v %+v", s, d)
	}
}

func TestRollBackOnDemandSwaps(t *testing.T) {
	s, _ := Start(staged(t), time.Unix(0, 0), time.Minute)
	s = Confirm(s)

	back, err := RollBack(s, time.Unix(60, 0), "asked")
	if err != nil || back.Active != installed || back.Previous == nil || *back.Previous != slotA || back.Trial != nil {
		t.Fatalf("%+v %v", back, err)
	}

	if want := (Rollback{At: time.Unix(60, 0), From: "v0.3.0", To: "v0.2.0", Reason: "asked"}); back.LastRollback == nil || *back.LastRollback != want {
		t.Fatalf("recorded %+v, want %+v (not by the node)", back.LastRollback, want)
	}

	if again, err := RollBack(back, time.Unix(0, 0), "asked"); err != nil || again.Active != slotA {
		t.Fatalf("rolling the rollback back: %+v %v", again, err)
	}

	if _, err := RollBack(State{Active: installed}, time.Unix(0, 0), "asked"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback without a previous version: %v", err)
	}
}

func TestStageOverPreviousDropsIt(t *testing.T) {
	s, _ := Start(staged(t), time.Unix(0, 0), time.Minute)
	s = Confirm(s)
	s, _ = RollBack(s, time.Unix(0, 0), "asked") // active installed, previous a

	next := Slot{Name: NextSlot(s), BinDir: "/s/a/bin", Version: "v0.3.1"}
	if next.Name != "a" {
		t.Fatalf("next slot %s", next.Name)
	}

	s, err := Stage(s, next)
	if err != nil || s.Previous != nil {
		t.Fatalf("a previous version in the slot installed over is still kept: %+v %v", s.Previous, err)
	}

	if _, err := RollBack(s, time.Unix(0, 0), "asked"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback to a slot installed over: %v", err)
	}
}

func TestNextSlotAlternates(t *testing.T) {
	for active, want := range map[string]string{InstalledSlot: "a", "a": "b", "b": "a"} {
		if got := NextSlot(State{Active: Slot{Name: active}}); got != want {
			t.Errorf("NextSlot with %s active = %s, want %s", active, got, want)
		}
	}
}

func TestStoreRoundTrip(t *testing.T) {
	st := Store{Dir: t.TempDir()}

	if _, ok, err := st.Load(); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}

	want, _ := Start(staged(t), time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), time.Minute)
	if err := st.Save(want); err != nil {
		t.Fatal(err)
	}

	got, ok, err := st.Load()
	if !ok || err != nil || got.Active != want.Active || *got.Previous != *want.Previous || !got.Trial.Deadline.Equal(want.Trial.Deadline) {
		t.Fatalf("%+v %v %v", got, ok, err)
	}

	if err := writeFile(filepath.Join(st.Dir, "state.json"), "{not json"); err != nil {
		t.Fatal(err)
	}

	if _, _, err := st.Load(); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("damaged state: %v", err)
	}
}

func TestCheckQuorum(t *testing.T) {
	up := func(n string) Member { return Member{Name: n, Healthy: true} }
	down := func(n string) Member { return Member{Name: n} }

	for _, tc := range []struct {
		name    string
		members []Member
		refused string
	}{
		{"alone", []Member{up("cp1")}, ""},
		{"three healthy", []Member{up("cp1"), up("cp2"), up("cp3")}, ""},
		{"self down, others up", []Member{down("cp1"), up("cp2"), up("cp3")}, ""},
		{"one other down", []Member{up("cp1"), down("cp2"), up("cp3")}, "not healthy: cp2"},
		{"two of two", []Member{up("cp1"), up("cp2")}, "only 1 (cp2) would be"},
		{"five, two down", []Member{up("cp1"), down("cp5"), up("cp3"), down("cp4"), up("cp2")}, "not healthy: cp4, cp5"},
		{"five, one down", []Member{up("cp1"), down("cp5"), up("cp3"), up("cp4"), up("cp2")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckQuorum(tc.members, "cp1")
			if tc.refused == "" {
				if err != nil {
					t.Fatal(err)
				}

				return
			}

			if !errors.Is(err, ErrQuorum) || !strings.Contains(err.Error()+";", tc.refused) {
				t.Fatalf("CheckQuorum: %v, want a refusal naming %q", err, tc.refused)
			}
		})
	}
}
