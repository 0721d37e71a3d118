package carotation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout"
)

// loadMembers lists the members that hold the CA, control planes first.
func (r *Rotation) loadMembers(ctx context.Context) error {
	all, err := r.w.Members(ctx, nil, r.kind.holds)
	if err != nil {
		return err
	}

	r.members, r.skipped = nil, 0

	for _, m := range all {
		if !r.kind.holds(m) {
			r.skipped++

			continue
		}

		r.members = append(r.members, m)
	}

	if !slices.ContainsFunc(r.members, rollout.Member.ControlPlane) {
		return rollout.ErrNoControlPlane
	}

	return nil
}

// checkReachable calls every member: a node that does not answer is named
// and the rotation stops, rather than leave it behind, locked out.
func (r *Rotation) checkReachable(ctx context.Context) error {
	if down := r.w.Unreachable(ctx, r.members); len(down) > 0 {
		return fmt.Errorf("the rotation stops: these members do not answer, and would be locked out if it went on:\n  %s\n"+
			"bring them back (or remove them from the cluster) and run again with --resume", strings.Join(down, "\n  "))
	}

	return nil
}

// callEveryone checks that the client works on every member.
func (r *Rotation) callEveryone(ctx context.Context) error {
	for _, m := range r.members {
		if err := r.w.Version(ctx, m); err != nil {
			return fmt.Errorf("%s refuses the client config: %w", m, err)
		}
	}

	return nil
}

// firstConfig reads the config in effect of the first member, a control
// plane.
func (r *Rotation) firstConfig(ctx context.Context) (*certs.MachineConfig, error) {
	cfg, err := r.w.ReadConfig(ctx, r.members[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.members[0], err)
	}

	return cfg, nil
}

// editAll applies a change to every member, then checks each.
func (r *Rotation) editAll(ctx context.Context, change func(*certs.MachineConfig), check func(*certs.MachineConfig) error) error {
	return r.w.EditAll(ctx, r.members, change, check)
}

// edit is the change e of the kind, for editAll.
func (r *Rotation) edit(e Edit) func(*certs.MachineConfig) {
	return func(c *certs.MachineConfig) { r.kind.Config.Edit(c, e) }
}
