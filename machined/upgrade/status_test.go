package upgrade

import (
	"testing"
	"time"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

// TestStatus: the resource shows what the state records, through the
// life of an upgrade: never upgraded, staged, on trial, rolled back by
// the node itself.
func TestStatus(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	onTrial, _ := Start(staged(t), at, time.Minute)
	rolled, reason, _ := Expire(onTrial, at.Add(time.Minute))

	for _, tc := range []struct {
		name string
		s    State
		want resourcetypes.UpgradeStatusSpec
	}{{
		name: "never upgraded",
		s:    State{Active: installed},
		want: resourcetypes.UpgradeStatusSpec{ActiveSlot: InstalledSlot, ActiveVersion: "v0.2.0"},
	}, {
		name: "staged",
		s:    staged(t),
		want: resourcetypes.UpgradeStatusSpec{ActiveSlot: InstalledSlot, ActiveVersion: "v0.2.0", StagedVersion: "v0.3.0"},
	}, {
		name: "on trial",
		s:    onTrial,
		want: resourcetypes.UpgradeStatusSpec{
			ActiveSlot: "a", ActiveVersion: "v0.3.0", PreviousVersion: "v0.2.0",
			OnTrial: true, TrialSince: at, TrialDeadline: at.Add(time.Minute), TrialStarts: 1,
		},
	}, {
		name: "rolled back by the node",
		s:    rolled,
		want: resourcetypes.UpgradeStatusSpec{
			ActiveSlot: InstalledSlot, ActiveVersion: "v0.2.0",
			LastRollback: resourcetypes.UpgradeRollback{At: at.Add(time.Minute), From: "v0.3.0", To: "v0.2.0", Reason: reason, ByNode: true},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Status(); got != tc.want {
				t.Fatalf("Status =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
