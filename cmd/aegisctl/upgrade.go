package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/rollout/upgrade"
)

// upgradeFlags are the flags of upgrade.
type upgradeFlags struct {
	bundle      string
	batch       int
	nodeTimeout time.Duration
	dryRun      bool
}

// bundleVersion is the Aegis version the manifest of the release bundle
// at path names. The node checks every file of the bundle when it
// receives it; the client reads only the manifest, to plan.
func bundleVersion(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // read-only

	m, err := bundle.ReadManifest(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}

	return m.Version, nil
}

// upgradeLong is the help of upgrade.
const upgradeLong = `Upgrade Aegis on every member of the cluster, as the endpoint's membership
list names them, to the version of a release bundle (the version its
manifest names):
  1. the control planes one at a time (those the client calls through
     last), each only while every control plane is healthy, so that etcd
     keeps its quorum;
  2. then the workers, --batch at a time.
Each member is checked healthy, given the bundle over the API, asked to
upgrade (MachineService.Upgrade), and waited on until it reports the
bundle's version and its services (and, on a control plane, its etcd
member) are healthy, within --node-timeout; only then does the next batch
go. Progress is printed as it goes, with the time each member took. At the
end the members are listed again and every one's version read: a node that
joined meanwhile, or a member that went back to the version it kept, fails
the upgrade, named.

The first member that fails stops the upgrade: no member after it is
touched. The error names the member, what failed (the health check before
its upgrade, the delivery, the Upgrade call, or the wait), which members
are upgraded and which are not. A member that refuses its upgrade (a
control plane whose going would cost etcd its quorum, for one) is left as
it was; a member that is not healthy in time after its upgrade rolls back
by itself to the version it kept. A member that reports such a rollback
(its upgrade status, 'aegisctl -n NODE get upgrade') stops the upgrade at
once, with the version it went back to and the reason it gives, rather
than at the end of --node-timeout; a member of an older Aegis, which does
not report it, is waited on until then.

To resume, run the same command again: members already on the bundle's
version are skipped, so it goes on from the member it stopped at.

Before anything changes every member must answer, and the bundle's version
must be within the skew policy of every member's version (the same minor or
the next, same major; never a downgrade); otherwise the upgrade is refused,
naming each member. A node that holds a live certificate of the cluster but
is not in the member list is refused too (see 'aegisctl members
certified'). The nodes named with -n play no part: every member is
upgraded, through the endpoint, which must be a control plane.

Nothing changes unless --dry-run=false: the dry run prints the plan (each
member, its role, its version, the target and its batch).`

func newUpgradeCommand(e *env) *cobra.Command {
	var f upgradeFlags

	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade every node of the cluster to a release bundle's version, one control plane at a time (admin only)",
		Long:  upgradeLong,
		Example: `  aegisctl upgrade --bundle aegis-v0.3.0.tar.gz                         # the plan, changes nothing
  aegisctl upgrade --bundle aegis-v0.3.0.tar.gz --dry-run=false
  aegisctl upgrade --bundle aegis-v0.3.0.tar.gz --dry-run=false --batch 3 --node-timeout 10m
  aegisctl upgrade --bundle aegis-v0.3.0.tar.gz --dry-run=false         # again after a stop: goes on where it stopped`,
		Args: cobra.NoArgs,
	}

	fl := cmd.Flags()
	fl.StringVar(&f.bundle, "bundle", "", "the release bundle to upgrade to (required)")
	fl.IntVar(&f.batch, "batch", 1, "how many workers are upgraded at once")
	fl.DurationVar(&f.nodeTimeout, "node-timeout", upgrade.DefaultNodeTimeout,
		"how long a node's delivery, then its upgrade until it is healthy on the new version, may take")
	fl.BoolVar(&f.dryRun, "dry-run", true, "print the plan, change nothing")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkUpgradeFlags(f); err != nil {
			return err
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			if len(s.nodes) > 0 {
				return fmt.Errorf("upgrade changes every member of the cluster through the endpoint; drop -n (%s)", strings.Join(s.nodes, ", "))
			}

			return runUpgrade(ctx, s.e, upgrade.Options{
				Options: s.rolloutOptions(f.dryRun), Upload: upgrade.Upload, Bundle: f.bundle,
				BundleVersion: bundleVersion, Batch: f.batch, NodeTimeout: f.nodeTimeout, Endpoints: s.endpoints,
			})
		})
	}

	return cmd
}

// checkUpgradeFlags refuses flags, and a file that is no release bundle,
// before anything is dialed.
func checkUpgradeFlags(f upgradeFlags) error {
	switch {
	case f.bundle == "":
		return errors.New("--bundle: name the release bundle to upgrade to")
	case f.batch < 1:
		return fmt.Errorf("--batch %d: want 1 or more workers at once", f.batch)
	case f.nodeTimeout <= 0:
		return fmt.Errorf("--node-timeout %s: want a positive duration", f.nodeTimeout)
	}

	if _, err := bundleVersion(f.bundle); err != nil {
		return fmt.Errorf("--bundle: %w", err)
	}

	return nil
}

// runUpgrade prepares the upgrade, prints its plan, and runs it unless it
// is a dry run.
func runUpgrade(ctx context.Context, e *env, opts upgrade.Options) error {
	u, err := upgrade.Prepare(ctx, opts)
	if err != nil {
		return err
	}

	printUpgradePlan(e.stdout, u.Plan(), opts.Batch)

	if opts.DryRun {
		fmt.Fprintln(e.stdout, "\nDry run: nothing changed. Run again with --dry-run=false to upgrade.")

		return nil
	}

	fmt.Fprintln(e.stdout)

	return u.Run(ctx)
}
