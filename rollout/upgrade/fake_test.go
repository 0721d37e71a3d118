package upgrade

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/rollout/upgrade/upgradetest"
)

const (
	fromVersion   = "v0.2.0"
	targetVersion = "v0.3.0"
	bundlePath    = "/releases/aegis-v0.3.0.tar"
)

// newFake is a cluster of 3 control planes and n workers on fromVersion.
func newFake(workers int) *upgradetest.Cluster {
	return upgradetest.New(3, workers, fromVersion, targetVersion)
}

// options are an upgrade's of f, with a fake clock and out as the output.
func options(f *upgradetest.Cluster, clk clock.Clock, out *strings.Builder) Options {
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
