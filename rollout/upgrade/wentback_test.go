package upgrade

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/rollout/upgrade/upgradetest"
)

const crashReason = "v0.3.0: service apid exited 3 times in a row without coming up (last: exit status 1)"

// rollbackAt is when the fake's members went back.
var rollbackAt = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// wentBack is the rollback of the upgrade to targetVersion a member
// reports, for reason, by itself or not.
func wentBack(reason string, byNode bool) resourcetypes.UpgradeRollback {
	return resourcetypes.UpgradeRollback{At: rollbackAt, From: targetVersion, To: fromVersion, Reason: reason, ByNode: byNode}
}

// TestStopsAtAMemberThatWentBack: a member that reports, after its
// Upgrade call, a rollback it had not reported before stops the run at
// once, long before the node timeout, with the version it went back to
// and its reason; who is upgraded and who is not are listed, and nothing
// after it is touched.
func TestStopsAtAMemberThatWentBack(t *testing.T) {
	f := newFake(2)
	f.GoesBack["cp-2"] = wentBack(crashReason, true)

	var out strings.Builder

	clk := newClock()
	start := clk.Now()

	_, err := run(t, options(f, clk, &out))
	if err == nil {
		t.Fatalf("no error\n%s", out.String())
	}

	for _, w := range []string{
		"upgrade stopped at cp-2 (10.0.0.3), waiting for it: it went back to v0.2.0 by itself at 2026-11-28T12:00:00Z: " + crashReason + "\n",
		"upgraded to v0.3.0: cp-1 (10.0.0.2)\n",
		"not touched: cp-3 (10.0.0.4), w-1 (10.0.1.2), w-2 (10.0.1.3)\n",
		"It runs the version it kept again ('aegisctl -n 10.0.0.3 get upgrade'",
		"run the same upgrade again",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}

	if strings.Contains(err.Error(), "roll it back (MachineService.Rollback) if it is stuck") {
		t.Errorf("the error tells to roll back a member that went back:\n%v", err)
	}

	if want := []string{"deliver cp-1", "upgrade cp-1", "deliver cp-2", "upgrade cp-2"}; !slices.Equal(f.Changes(), want) {
		t.Fatalf("changes %v, want %v", f.Changes(), want)
	}

	if !strings.Contains(out.String(), "cp-2 (10.0.0.3): it went back to v0.2.0 by itself") {
		t.Errorf("no progress line of the rollback:\n%s", out.String())
	}

	if waited := clk.Now().Sub(start); waited > 30*time.Second {
		t.Fatalf("stopped after %s on the fake clock: it waited for the node timeout", waited)
	}
}

// TestWentBackIsThisUpgrades: only a rollback made after the Upgrade call
// stops the run at once. A member that reported the same rollback before
// (that of an earlier run, resumed now), or that does not serve its
// upgrade status (an older version), is waited on as before, until the
// node timeout.
func TestWentBackIsThisUpgrades(t *testing.T) {
	earlier := wentBack(crashReason, true)
	earlier.At = rollbackAt.Add(-time.Hour)

	for _, tt := range []struct {
		name string
		set  func(f *upgradetest.Cluster)
		// again: w-1's status is read again while it is waited on.
		again bool
	}{{
		name: "a rollback of an earlier run",
		set: func(f *upgradetest.Cluster) {
			f.Rollbacks["w-1"], f.Stuck["w-1"] = earlier, true
		},
		again: true,
	}, {
		name: "no upgrade status served",
		set: func(f *upgradetest.Cluster) {
			f.NoStatus["w-1"] = errors.New(`rpc error: code = Unimplemented desc = resource type "UpgradeStatuses.aegis.dev" is not served`)
			f.GoesBack["w-1"] = wentBack(crashReason, true)
		},
		again: false,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(1)
			tt.set(f)

			var out strings.Builder

			clk := newClock()
			opts := options(f, clk, &out)
			opts.NodeTimeout, opts.Interval = time.Minute, 30*time.Second

			_, err := run(t, opts)
			if err == nil || !strings.Contains(err.Error(), "waiting for it: it did not run v0.3.0 and pass its health check within 1m0s (last: runs v0.2.0)") {
				t.Fatalf("%v\n%s", err, out.String())
			}

			reads := slices.Index(f.Log("status"), "status w-1")
			if reads = len(f.Log("status")) - reads; (reads > 1) != tt.again {
				t.Errorf("w-1's status read %d times (again while waited on: want %v): %v", reads, tt.again, f.Log("status"))
			}
		})
	}
}

// TestWentBackOnAnOperatorsRollback: a rollback asked through the API
// while the run waits stops it too, worded as such.
func TestWentBackOnAnOperatorsRollback(t *testing.T) {
	f := newFake(0)
	f.GoesBack["cp-1"] = wentBack("rollback asked through the API", false)

	var out strings.Builder

	_, err := run(t, options(f, newClock(), &out))
	if err == nil || !strings.Contains(err.Error(), "it went back to v0.2.0 on a Rollback asked through the API at 2026-11-28T12:00:00Z") {
		t.Fatalf("%v\n%s", err, out.String())
	}
}
