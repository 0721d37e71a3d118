// Package upgrade upgrades every member of a cluster to the Aegis version
// of one release bundle, on the rollout engine: the control planes one at
// a time, then the workers in batches, each member given the bundle, asked
// to upgrade (MachineService.Upgrade), and waited on until it reports the
// bundle's version and is healthy, before the next batch goes. The first
// member that fails stops the run: nothing after it is touched, and the
// error names the member, what failed and how to go on. A member that
// goes back to the version it kept (its UpgradeStatus reports a rollback
// it had not reported before its Upgrade call) fails at once, with the
// reason it gives, rather than at the end of its wait.
//
// A run is resumable by design rather than by record: the plan skips every
// member that already runs the target, so the same run started again goes
// on from the member it stopped at. Before anything changes, every member
// must answer (a node with a live certificate of the cluster that is not
// listed, or a member that does not answer, is refused, named), and the
// target must be within the skew policy of every member's version.
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/rollout"
)

// Cluster is what an upgrade needs of the cluster. Remote is the one that
// calls the members through the endpoint.
type Cluster interface {
	// Members lists the members, control planes first, refusing (naming
	// it) a node that holds a live certificate of the cluster but is not
	// listed.
	Members(ctx context.Context) ([]rollout.Member, error)
	// Version is the Aegis version m runs.
	Version(ctx context.Context, m rollout.Member) (string, error)
	// Healthy is nil when m's services are up (and, on a control plane,
	// its etcd member is healthy), else what is not.
	Healthy(ctx context.Context, m rollout.Member) error
	// Deliver gives m the bundle at path and returns the reference m's
	// Upgrade call names it by. ctx bounds the whole delivery.
	Deliver(ctx context.Context, m rollout.Member, path string) (ref string, err error)
	// LastRollback is the last rollback m reports having made (its
	// UpgradeStatus resource): zero when it never went back. An error (a
	// member of an older version that does not serve the type, or one
	// that does not answer) leaves m waited on by version and health.
	LastRollback(ctx context.Context, m rollout.Member) (resourcetypes.UpgradeRollback, error)
	// Upgrade asks m to switch to the delivered bundle ref; it returns
	// once m has accepted, before it has switched. An error that wraps
	// ErrNotStarted says m refused, and nothing changed on it.
	Upgrade(ctx context.Context, m rollout.Member, ref string) error
}

// ErrNotStarted marks an Upgrade call the member answered with a refusal
// (it does not upgrade, the request or the moment is wrong, as when its
// etcd would lose quorum): the member runs what it ran. Any other failure
// of the call leaves it unknown whether the upgrade started.
var ErrNotStarted = errors.New("it refused, and did not start the upgrade")

// Options are an upgrade's: the walker's and the upgrade's own.
type Options struct {
	rollout.Options
	// Cluster is what the upgrade calls. nil: a Remote calling through
	// Client, uploading with Upload.
	Cluster Cluster
	// Upload uploads a bundle to a member, for the Remote. nil: the
	// Remote refuses to deliver (ErrNoUpload).
	Upload UploadFunc
	// Bundle is the path of the release bundle. Required.
	Bundle string
	// BundleVersion reads the Aegis version of the bundle at a path from
	// its manifest. Required.
	BundleVersion func(path string) (string, error)
	// Skew returns an error when a member running one version may not go
	// to the target. nil: version.CheckUpgrade, Aegis's skew policy.
	Skew func(running, target string) error
	// Batch is how many workers are upgraded at once. Zero or less: one.
	Batch int
	// NodeTimeout bounds a member's delivery, and then the wait from its
	// Upgrade call until it reports the target and is healthy. Zero:
	// DefaultNodeTimeout.
	NodeTimeout time.Duration
	// Interval is the pause between two checks of the members waited on.
	// Zero: DefaultInterval.
	Interval time.Duration
	// Endpoints are the client's endpoints: the control planes they name
	// are upgraded after the others. nil: none is told apart.
	Endpoints []string
}

// Upgrade is one run, prepared: the target read, the members listed and
// their versions read, the plan made.
type Upgrade struct {
	opts    Options
	w       *rollout.Walker
	cluster Cluster
	plan    *Plan

	upgraded []Entry
}

// Prepare reads the bundle's version and every member's, and makes the
// plan; nothing changes. A member that does not answer, or a target
// outside the skew policy of a member's version, refuses the upgrade here.
func Prepare(ctx context.Context, opts Options) (*Upgrade, error) {
	opts = withDefaults(opts)
	if opts.Bundle == "" || opts.BundleVersion == nil {
		return nil, errors.New("upgrade: no release bundle, or no way to read one")
	}

	target, err := opts.BundleVersion(opts.Bundle)
	if err != nil {
		return nil, fmt.Errorf("reading the release bundle %s: %w", opts.Bundle, err)
	}

	u := &Upgrade{opts: opts, w: rollout.New(opts.Options), cluster: opts.Cluster}
	if u.cluster == nil {
		u.cluster = &Remote{Walker: u.w, Upload: opts.Upload}
	}

	in := planInput{target: target, bundle: opts.Bundle, batch: opts.Batch, endpoints: opts.Endpoints, skew: opts.Skew}

	if in.members, err = u.cluster.Members(ctx); err != nil {
		return nil, err
	}

	if len(in.members) == 0 {
		return nil, errEmpty
	}

	if in.versions, err = u.readVersions(ctx, in.members); err != nil {
		return nil, err
	}

	if u.plan, err = makePlan(in); err != nil {
		return nil, err
	}

	return u, nil
}

func withDefaults(opts Options) Options {
	if opts.Skew == nil {
		opts.Skew = version.CheckUpgrade
	}

	if opts.Batch <= 0 {
		opts.Batch = 1
	}

	if opts.NodeTimeout <= 0 {
		opts.NodeTimeout = DefaultNodeTimeout
	}

	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}

	return opts
}

// readVersions reads every member's version, and refuses, naming each
// one, when a member does not answer: the upgrade would pass it over, and
// leave it behind on a version the others may outgrow.
func (u *Upgrade) readVersions(ctx context.Context, members []rollout.Member) (map[string]string, error) {
	versions := map[string]string{}

	var down []string

	for _, m := range members {
		v, err := u.cluster.Version(ctx, m)
		if err != nil {
			down = append(down, fmt.Sprintf("%s: %s", m, oneLine(err)))

			continue
		}

		versions[m.Addr] = v
	}

	if len(down) > 0 {
		return nil, fmt.Errorf("nothing changed: these members do not answer, and the upgrade would leave them behind:\n  %s\n"+
			"bring them back (or take one that is gone for good out with 'aegisctl members remove') and run again",
			strings.Join(down, "\n  "))
	}

	return versions, nil
}

// Plan is what Run does.
func (u *Upgrade) Plan() *Plan { return u.plan }

// Run upgrades the members batch by batch, as the plan says, and stops at
// the first batch in which a member fails; never in a dry run.
func (u *Upgrade) Run(ctx context.Context) error {
	if u.w.DryRun() {
		return rollout.ErrDryRun
	}

	batches := u.plan.Batches()
	start := u.w.Clock().Now()

	u.w.Printf("Upgrading %d of %d members to %s, control planes one at a time, then workers %d at a time.\n",
		u.plan.Pending(), len(u.plan.Entries), u.plan.Target, u.opts.Batch)

	for i, batch := range batches {
		u.w.Printf("\nBatch %d of %d: %s\n", i+1, len(batches), names(batch))

		if failed := u.runBatch(ctx, batch); len(failed) > 0 {
			return u.stopped(failed)
		}
	}

	if err := u.verify(ctx); err != nil {
		return err
	}

	u.w.Printf("\nEvery member runs %s: %d upgraded in %s.\n", u.plan.Target, len(u.upgraded), u.since(start))

	return nil
}

// verify lists the members again and reads every one's version: a member
// that went back to the version it kept after it was seen healthy, or a
// node that joined during the run, would otherwise be left behind unseen.
func (u *Upgrade) verify(ctx context.Context) error {
	members, err := u.cluster.Members(ctx)
	if err != nil {
		return fmt.Errorf("every member planned was upgraded, but listing the members again failed: %w", err)
	}

	var behind []string

	for _, m := range members {
		v, err := u.cluster.Version(ctx, m)

		switch {
		case err != nil:
			behind = append(behind, fmt.Sprintf("%s: %s", m, oneLine(err)))
		case v != u.plan.Target:
			behind = append(behind, fmt.Sprintf("%s: runs %s", m, v))
		}
	}

	if len(behind) > 0 {
		return fmt.Errorf("every member planned was upgraded, but these members do not run %s now "+
			"(joined during the upgrade, or went back to the version they kept):\n  %s\n"+
			"find out why, then run the same upgrade again: it upgrades only those",
			u.plan.Target, strings.Join(behind, "\n  "))
	}

	return nil
}

// since is the time since t, rounded for a progress line.
func (u *Upgrade) since(t time.Time) time.Duration {
	return u.w.Clock().Now().Sub(t).Round(time.Millisecond)
}

// names lists the entries as a progress line shows them.
func names(entries []Entry) string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.String()
	}

	return strings.Join(out, ", ")
}

// oneLine is an error's text on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
