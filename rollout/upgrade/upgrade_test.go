package upgrade

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/rollout/upgrade/upgradetest"
)

// TestOrder: the control planes go one at a time (the endpoint's last),
// then the workers in batches; each batch is on the target and healthy
// before the next one's first Upgrade call, and the output says so, with
// the time each member took.
func TestOrder(t *testing.T) {
	f := newFake(5)

	var out strings.Builder

	opts := options(f, newClock(), &out)
	opts.Batch = 2
	opts.Endpoints = []string{"10.0.0.2:50000"}

	u, err := run(t, opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}

	want := []string{
		"upgrade cp-2", "ok cp-2", "upgrade cp-3", "ok cp-3", "upgrade cp-1", "ok cp-1",
		"upgrade w-1", "upgrade w-2", "ok w-1", "ok w-2",
		"upgrade w-3", "upgrade w-4", "ok w-3", "ok w-4",
		"upgrade w-5", "ok w-5",
	}
	if got := f.Log("upgrade", "ok"); !slices.Equal(got, want) {
		t.Fatalf("calls\n%v\nwant\n%v", got, want)
	}

	if got := len(u.Plan().Batches()); got != 6 {
		t.Errorf("%d batches, want 6", got)
	}

	for _, line := range []string{
		"Batch 1 of 6: cp-2 (10.0.0.3)\n",
		"Batch 4 of 6: w-1 (10.0.1.2), w-2 (10.0.1.3)\n",
		"cp-2 (10.0.0.3): runs v0.3.0 and is healthy, ",
		"waiting: not answering (it restarts during its upgrade): connection refused",
		"Every member runs v0.3.0: 8 upgraded in ",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

// TestResume: members already on the target are skipped, which is how a
// run started again goes on where the last one stopped.
func TestResume(t *testing.T) {
	f := newFake(3)
	f.Versions["cp-1"], f.Versions["cp-2"], f.Versions["w-1"] = targetVersion, targetVersion, targetVersion

	var out strings.Builder

	u, err := run(t, options(f, newClock(), &out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}

	want := []string{"deliver cp-3", "upgrade cp-3", "deliver w-2", "upgrade w-2", "deliver w-3", "upgrade w-3"}
	if got := f.Changes(); !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}

	if u.Plan().Pending() != 3 || !u.Plan().Entries[0].Skipped() {
		t.Fatalf("plan %+v: want cp-1, cp-2 and w-1 skipped", u.Plan().Entries)
	}

	if !strings.Contains(out.String(), "Upgrading 3 of 6 members to v0.3.0") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestStopsAtFirstFailure: whatever fails on a member stops the run:
// nothing after it is touched, and the error names the member, what
// failed, who is upgraded, who is not, and how to go on.
func TestStopsAtFirstFailure(t *testing.T) {
	boom := errors.New("boom")

	for _, tt := range []struct {
		name    string
		set     func(f *upgradetest.Cluster)
		changes []string
		want    []string
	}{{
		name:    "delivery",
		set:     func(f *upgradetest.Cluster) { f.FailDeliver["cp-2"] = boom },
		changes: []string{"deliver cp-1", "upgrade cp-1", "deliver cp-2"},
		want: []string{"upgrade stopped at cp-2 (10.0.0.3), delivering the bundle to it: boom",
			"upgraded to v0.3.0: cp-1 (10.0.0.2)\n", "not touched: cp-2 (10.0.0.3), cp-3 (10.0.0.4), w-1", "Nothing changed on it"},
	}, {
		name:    "upgrade call, second of a batch",
		set:     func(f *upgradetest.Cluster) { f.FailUpgrade["w-2"] = boom },
		changes: append(controlPlanes(), "deliver w-1", "deliver w-2", "upgrade w-1", "upgrade w-2"),
		want: []string{"upgrade stopped at w-2 (10.0.1.3), asking it to upgrade (MachineService.Upgrade): boom",
			"upgraded to v0.3.0: cp-1 (10.0.0.2), cp-2 (10.0.0.3), cp-3 (10.0.0.4), w-1 (10.0.1.2)\n",
			"not touched: w-3 (10.0.1.4)\n", "rolls back by itself", "'aegisctl -n 10.0.1.3 version'"},
	}, {
		name: "upgrade refused",
		set: func(f *upgradetest.Cluster) {
			f.FailUpgrade["cp-1"] = fmt.Errorf("%w: etcd would lose quorum", ErrNotStarted)
		},
		changes: []string{"deliver cp-1", "upgrade cp-1"},
		want: []string{"upgrade stopped at cp-1 (10.0.0.2), asking it to upgrade (MachineService.Upgrade): it refused, and did not start the upgrade: etcd would lose quorum",
			"not touched: cp-1 (10.0.0.2), cp-2", "Nothing changed on it"},
	}, {
		name:    "unhealthy before its upgrade",
		set:     func(f *upgradetest.Cluster) { f.Unhealthy["w-3"] = boom },
		changes: append(controlPlanes(), "deliver w-1", "deliver w-2", "upgrade w-1", "upgrade w-2"),
		want: []string{"upgrade stopped at w-3 (10.0.1.4), checking it is healthy before its upgrade: boom",
			"not touched: w-3 (10.0.1.4)\n", "Nothing changed on it"},
	}, {
		name:    "another control plane unhealthy",
		set:     func(f *upgradetest.Cluster) { f.Unhealthy["cp-3"] = boom },
		changes: nil,
		want: []string{"upgrade stopped at cp-3 (10.0.0.4), checking it is healthy before cp-1 (10.0.0.2) goes down (etcd must keep its quorum): boom",
			"upgraded to v0.3.0: none\n"},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(3)
			tt.set(f)

			var out strings.Builder

			opts := options(f, newClock(), &out)
			opts.Batch = 2

			_, err := run(t, opts)
			if err == nil {
				t.Fatalf("no error\n%s", out.String())
			}

			if got := f.Changes(); !slices.Equal(got, tt.changes) {
				t.Fatalf("changes %v, want %v", got, tt.changes)
			}

			for _, w := range append(tt.want, "run the same upgrade again: members already on v0.3.0 are skipped") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// controlPlanes are the changes of the three control planes upgraded.
func controlPlanes() []string {
	return []string{"deliver cp-1", "upgrade cp-1", "deliver cp-2", "upgrade cp-2", "deliver cp-3", "upgrade cp-3"}
}

// TestTimeout: a member that does not run the target and pass its health
// check within the node timeout stops the run, with what was last seen.
func TestTimeout(t *testing.T) {
	f := newFake(2)
	f.Stuck["w-1"] = true

	var out strings.Builder

	clk := newClock()
	opts := options(f, clk, &out)
	opts.NodeTimeout = time.Minute

	start := clk.Now()

	_, err := run(t, opts)
	if err == nil {
		t.Fatalf("no error\n%s", out.String())
	}

	for _, w := range []string{"upgrade stopped at w-1 (10.0.1.2), waiting for it: it did not run v0.3.0 and pass its health check within 1m0s (last: runs v0.2.0)",
		"not touched: w-2 (10.0.1.3)\n", "rolls back by itself"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}

	if slices.Contains(f.Changes(), "deliver w-2") {
		t.Fatal("w-2 was touched after w-1 failed")
	}

	if waited := clk.Now().Sub(start); waited < time.Minute || waited > 2*time.Minute {
		t.Fatalf("waited %s on the fake clock, want a little over the node timeout", waited)
	}
}

// TestVerifiesAtTheEnd: the members are listed and their versions read
// again once every batch is done: a node that joined during the run, or
// a member that went back to its kept version, fails the run, named.
func TestVerifiesAtTheEnd(t *testing.T) {
	f := newFake(1)

	var out strings.Builder

	opts := options(f, newClock(), &out)

	u, err := Prepare(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}

	f.List = append(f.List, rollout.Member{Name: "w-9", Addr: "10.0.1.9", Role: "worker"})
	f.Versions["w-9"] = fromVersion
	f.Restarts = 0

	err = u.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "do not run v0.3.0 now") || !strings.Contains(err.Error(), "w-9 (10.0.1.9): runs v0.2.0") {
		t.Fatalf("%v\n%s", err, out.String())
	}

	if strings.Contains(err.Error(), "w-1") || strings.Contains(out.String(), "Every member runs") {
		t.Fatalf("%v\n%s", err, out.String())
	}
}

// TestDryRun: a dry run plans and changes nothing.
func TestDryRun(t *testing.T) {
	f := newFake(2)

	var out strings.Builder

	opts := options(f, newClock(), &out)
	opts.DryRun = true

	u, err := Prepare(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}

	if err = u.Run(t.Context()); !errors.Is(err, rollout.ErrDryRun) {
		t.Fatalf("Run in a dry run: %v", err)
	}

	if got := f.Changes(); len(got) > 0 || out.Len() > 0 {
		t.Fatalf("a dry run changed %v, printed %q", got, out.String())
	}

	if u.Plan().Pending() != 5 {
		t.Fatalf("plan %+v", u.Plan())
	}
}

// TestRefusesBeforeAnything: a member that does not answer, a member list
// that is refused, a bundle that cannot be read, and a target outside the
// skew policy each refuse the upgrade before any change, naming what is
// wrong.
func TestRefusesBeforeAnything(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*upgradetest.Cluster, *Options)
		want []string
	}{{
		name: "unreachable",
		set: func(f *upgradetest.Cluster, _ *Options) {
			f.Down["w-2"] = errors.New("connection refused")
			f.Down["cp-3"] = errors.New("deadline exceeded")
		},
		want: []string{"nothing changed: these members do not answer", "cp-3 (10.0.0.4): deadline exceeded", "w-2 (10.0.1.3): connection refused"},
	}, {
		name: "member list refused",
		set: func(f *upgradetest.Cluster, _ *Options) {
			f.ListErr = errors.New("node w-9 holds a live certificate but is no member")
		},
		want: []string{"w-9 holds a live certificate"},
	}, {
		name: "bundle",
		set:  func(_ *upgradetest.Cluster, o *Options) { o.Bundle = "/nowhere" },
		want: []string{"reading the release bundle /nowhere: no bundle at /nowhere"},
	}, {
		name: "skew",
		set: func(f *upgradetest.Cluster, _ *Options) {
			f.Versions["w-1"], f.Versions["cp-2"], f.Versions["cp-3"] = "v0.1.4", "v0.1.0", "v0.1.0"
		},
		want: []string{"nothing changed: the bundle's version v0.3.0 is outside the skew policy of members:\n",
			"\n  version: outside the supported skew: v0.1.0 to v0.3.0 skips a minor version; upgrade to v0.2.x first: cp-2 (10.0.0.3), cp-3 (10.0.0.4)\n",
			"\n  version: outside the supported skew: v0.1.4 to v0.3.0 skips a minor version; upgrade to v0.2.x first: w-1 (10.0.1.2)"},
	}, {
		name: "downgrade",
		set:  func(f *upgradetest.Cluster, _ *Options) { f.Versions["cp-1"] = "v0.3.1" },
		want: []string{"version: a downgrade is not an upgrade: v0.3.1 to v0.3.0; use Rollback to return to the version the node kept: cp-1 (10.0.0.2)"},
	}, {
		name: "no control plane",
		set:  func(f *upgradetest.Cluster, _ *Options) { f.List = f.List[3:] },
		want: []string{rollout.ErrNoControlPlane.Error()},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(2)

			var out strings.Builder

			opts := options(f, newClock(), &out)
			tt.set(f, &opts)

			_, err := Prepare(t.Context(), opts)
			if err == nil {
				t.Fatal("prepared")
			}

			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}

			if got := f.Changes(); len(got) > 0 {
				t.Fatalf("changed %v", got)
			}
		})
	}
}

// TestRemoteWithoutUpload: a Remote with no way to upload refuses to
// deliver, rather than name a bundle the member was never given.
func TestRemoteWithoutUpload(t *testing.T) {
	if _, err := (&Remote{}).Deliver(t.Context(), rollout.Member{Addr: "10.0.0.2"}, bundlePath); !errors.Is(err, ErrNoUpload) {
		t.Fatalf("Deliver: %v, want ErrNoUpload", err)
	}
}
