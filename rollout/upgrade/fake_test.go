package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/rollout"
)

const (
	fromVersion   = "v0.2.0"
	targetVersion = "v0.3.0"
	bundlePath    = "/releases/aegis-v0.3.0.tar"
)

// fakeCluster is a cluster of members that upgrade as a real one would
// seem to from outside: after its Upgrade call a member does not answer
// for restarts Version calls, then runs the target and is healthy, unless
// a failure is set for it.
type fakeCluster struct {
	mu sync.Mutex

	members  []rollout.Member
	versions map[string]string // by name
	restarts int

	listErr     error
	down        map[string]error // Version fails
	unhealthy   map[string]error // Healthy fails
	failDeliver map[string]error
	failUpgrade map[string]error
	stuck       map[string]bool // never switches to the target

	restarting map[string]int
	upgraded   map[string]bool
	healthy    map[string]bool // reported healthy on the target once
	log        []string        // "deliver X", "upgrade X", "ok X"
}

// newFake is a cluster of 3 control planes and n workers on fromVersion.
func newFake(workers int) *fakeCluster {
	f := &fakeCluster{versions: map[string]string{}, restarts: 2, down: map[string]error{}, unhealthy: map[string]error{},
		failDeliver: map[string]error{}, failUpgrade: map[string]error{}, stuck: map[string]bool{},
		restarting: map[string]int{}, upgraded: map[string]bool{}, healthy: map[string]bool{}}

	for i := range 3 {
		f.add(fmt.Sprintf("cp-%d", i+1), fmt.Sprintf("10.0.0.%d", i+2), "controlplane")
	}

	for i := range workers {
		f.add(fmt.Sprintf("w-%d", i+1), fmt.Sprintf("10.0.1.%d", i+2), "worker")
	}

	return f
}

func (f *fakeCluster) add(name, addr, role string) {
	f.members = append(f.members, rollout.Member{Name: name, Addr: addr, Addrs: []string{addr}, Role: role})
	f.versions[name] = fromVersion
}

func (f *fakeCluster) Members(context.Context) ([]rollout.Member, error) {
	return f.members, f.listErr
}

func (f *fakeCluster) Version(_ context.Context, m rollout.Member) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if err := f.down[m.Name]; err != nil {
		return "", err
	}

	if f.restarting[m.Name] > 0 {
		f.restarting[m.Name]--

		return "", errors.New("connection refused")
	}

	return f.versions[m.Name], nil
}

func (f *fakeCluster) Healthy(_ context.Context, m rollout.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	if err := f.unhealthy[m.Name]; err != nil {
		return err
	}

	if f.upgraded[m.Name] && !f.healthy[m.Name] && f.versions[m.Name] == targetVersion {
		f.healthy[m.Name] = true
		f.log = append(f.log, "ok "+m.Name)
	}

	return nil
}

func (f *fakeCluster) Deliver(_ context.Context, m rollout.Member, path string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.log = append(f.log, "deliver "+m.Name)

	if err := f.failDeliver[m.Name]; err != nil {
		return "", err
	}

	return m.Name + ":" + path, nil
}

func (f *fakeCluster) Upgrade(_ context.Context, m rollout.Member, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.log = append(f.log, "upgrade "+m.Name)

	if ref != m.Name+":"+bundlePath {
		return fmt.Errorf("upgrade of %s names %q, which it was not given", m.Name, ref)
	}

	if err := f.failUpgrade[m.Name]; err != nil {
		return err
	}

	f.upgraded[m.Name] = true
	f.restarting[m.Name] = f.restarts

	if !f.stuck[m.Name] {
		f.versions[m.Name] = targetVersion
	}

	return nil
}

// changes are the calls that changed something, in order.
func (f *fakeCluster) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()

	var out []string

	for _, l := range f.log {
		if strings.HasPrefix(l, "deliver ") || strings.HasPrefix(l, "upgrade ") {
			out = append(out, l)
		}
	}

	return out
}

// filtered is the log of calls whose kind is one of kinds.
func (f *fakeCluster) filtered(kinds ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()

	var out []string

	for _, l := range f.log {
		for _, k := range kinds {
			if strings.HasPrefix(l, k+" ") {
				out = append(out, l)
			}
		}
	}

	return out
}

// options are an upgrade's of f, with a fake clock and out as the output.
func options(f *fakeCluster, clk clock.Clock, out *strings.Builder) Options {
	return Options{
		Options: rollout.Options{Out: out, Clock: clk},
		Cluster: f, Bundle: bundlePath,
		BundleVersion: func(path string) (string, error) {
			if path != bundlePath {
				return "", fmt.Errorf("no bundle at %s", path)
			}

			return targetVersion, nil
		},
	}
}

// run prepares and runs an upgrade, moving clk on whenever the upgrade
// waits on it, so that its pauses and timeouts pass at once.
func run(t *testing.T, opts Options) (*Upgrade, error) {
	t.Helper()

	u, err := Prepare(t.Context(), opts)
	if err != nil {
		return nil, err
	}

	clk := opts.Clock.(*clock.Fake)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		for clk.WaitForTimers(ctx, 1) == nil {
			clk.Advance(time.Second)
		}
	}()

	err = u.Run(t.Context())

	cancel()
	<-done

	return u, err
}

func newClock() *clock.Fake { return clock.NewFake(testutil.Epoch) }
