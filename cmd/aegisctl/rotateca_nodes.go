package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/certs"
)

// member is one node a rotation changes, reached through the endpoint.
type member struct {
	addr, host   string
	controlPlane bool
}

func (m member) String() string {
	if m.host == "" || m.host == m.addr {
		return m.addr
	}

	return m.host + " (" + m.addr + ")"
}

// loadMembers reads the cluster's members through the endpoint: control
// planes first, which a step changes before the workers that depend on
// them.
func (r *rotator) loadMembers(ctx context.Context) error {
	resp, err := membership.NewMembershipServiceClient(r.client().Conn()).List(ctx, &membership.ListRequest{})
	if err != nil {
		return fmt.Errorf("reading the cluster's members: %w", r.s.explain(err))
	}

	if err = failedNodes(resp); err != nil {
		return fmt.Errorf("reading the cluster's members: %w", err)
	}

	r.members, r.skipped = nil, 0

	for _, list := range resp.GetMessages() {
		for _, m := range list.GetMembers() {
			if len(m.GetAddresses()) == 0 {
				continue
			}

			mem := member{addr: m.GetAddresses()[0], host: m.GetHostname(), controlPlane: m.GetRole() != "worker"}
			if !r.kind.holds(mem) {
				r.skipped++

				continue
			}

			r.members = append(r.members, mem)
		}
	}

	if !slices.ContainsFunc(r.members, func(m member) bool { return m.controlPlane }) {
		return errors.New("the cluster's member list names no control plane yet (a node just started?): try again in a moment")
	}

	slices.SortStableFunc(r.members, func(a, b member) int {
		switch {
		case a.controlPlane == b.controlPlane:
			return strings.Compare(a.addr, b.addr)
		case a.controlPlane:
			return -1
		default:
			return 1
		}
	})

	return nil
}

// checkReachable calls every member: a node that does not answer is named
// and the rotation stops, rather than leave it behind, locked out.
func (r *rotator) checkReachable(ctx context.Context) error {
	var down []string

	for _, m := range r.members {
		if err := r.version(ctx, m); err != nil {
			down = append(down, fmt.Sprintf("%s: %v", m, err))
		}
	}

	if len(down) > 0 {
		return fmt.Errorf("the rotation stops: these members do not answer, and would be locked out if it went on:\n  %s\n"+
			"bring them back (or remove them from the cluster) and run again with --resume", strings.Join(down, "\n  "))
	}

	return nil
}

// version calls Version on one member through the endpoint.
func (r *rotator) version(ctx context.Context, m member) error {
	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := r.client().Version(client.WithNode(ctx, m.addr))
	if err != nil {
		return r.s.explain(err)
	}

	return failedNodes(resp)
}

// nodeConfig reads the config in effect of one member, secrets included.
func (r *rotator) nodeConfig(ctx context.Context, m member) (*certs.MachineConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	data, err := currentConfig(client.WithNode(ctx, m.addr), r.client())
	if err != nil {
		return nil, fmt.Errorf("%s: reading its machine config: %w", m, r.s.explain(err))
	}

	cfg, err := certs.ParseMachineConfig(m.String()+"'s machine config", data, r.e.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}

	return cfg, nil
}

// edit applies a change to one member's config without a reboot.
func (r *rotator) edit(ctx context.Context, m member, change func(*certs.MachineConfig)) error {
	cfg, err := r.nodeConfig(ctx, m)
	if err != nil {
		return err
	}

	change(cfg)

	data, err := cfg.Marshal()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := r.client().ApplyConfiguration(client.WithNode(ctx, m.addr), &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err == nil {
		err = failedNodes(resp)
	}

	if err != nil {
		return fmt.Errorf("%s: applying the change: %w", m, r.s.explain(err))
	}

	return nil
}

// editAll applies a change to every member, control planes first, and
// then verifies on every member that its config in effect passes check.
func (r *rotator) editAll(ctx context.Context, change func(*certs.MachineConfig), check func(*certs.MachineConfig) error) error {
	for _, m := range r.members {
		if err := r.edit(ctx, m, change); err != nil {
			return err
		}
	}

	return r.verifyAll(ctx, check)
}

// verifyAll checks the config in effect of every member.
func (r *rotator) verifyAll(ctx context.Context, check func(*certs.MachineConfig) error) error {
	for _, m := range r.members {
		cfg, err := r.nodeConfig(ctx, m)
		if err != nil {
			return err
		}

		if err = check(cfg); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}

	return nil
}

// callEveryone checks that the client works on every member.
func (r *rotator) callEveryone(ctx context.Context) error {
	for _, m := range r.members {
		if err := r.version(ctx, m); err != nil {
			return fmt.Errorf("%s refuses the client config: %w", m, err)
		}
	}

	return nil
}
