package rollout

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/certs"
)

// ReadConfig reads and parses the config in effect of one member, secrets
// included.
func (w *Walker) ReadConfig(ctx context.Context, m Member) (*certs.MachineConfig, error) {
	cctx, cancel := w.Route(ctx, m)
	defer cancel()

	resp, err := machineconfig.NewMachineConfigServiceClient(w.client.Conn()).Get(cctx, &machineconfig.GetRequest{})
	if err = w.Check(resp, err); err == nil && len(resp.GetMessages()) != 1 {
		err = fmt.Errorf("expected the config of one node, got %d", len(resp.GetMessages()))
	}

	if err != nil {
		return nil, fmt.Errorf("reading its machine config: %w", err)
	}

	return certs.ParseMachineConfig(m.String()+"'s machine config", resp.GetMessages()[0].GetData(), w.opts.Clock.Now())
}

// Apply sends cfg to one member, to be applied without a reboot.
func (w *Walker) Apply(ctx context.Context, m Member, cfg *certs.MachineConfig) error {
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}

	cctx, cancel := w.Route(ctx, m)
	defer cancel()

	resp, err := w.client.ApplyConfiguration(cctx, &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})

	return w.Check(resp, err)
}

// Edit applies a change to one member's config in effect, without a
// reboot. Its errors name the member.
func (w *Walker) Edit(ctx context.Context, m Member, change func(*certs.MachineConfig)) error {
	cfg, err := w.ReadConfig(ctx, m)
	if err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}

	change(cfg)

	if err = w.Apply(ctx, m, cfg); err != nil {
		return fmt.Errorf("%s: applying the change: %w", m, err)
	}

	return nil
}

// EditAll applies a change to every member in turn, then verifies on
// every member that its config in effect passes check.
func (w *Walker) EditAll(ctx context.Context, members []Member, change func(*certs.MachineConfig), check func(*certs.MachineConfig) error) error {
	for _, m := range members {
		if err := w.Edit(ctx, m, change); err != nil {
			return err
		}
	}

	return w.VerifyAll(ctx, members, check)
}

// VerifyAll checks the config in effect of every member.
func (w *Walker) VerifyAll(ctx context.Context, members []Member, check func(*certs.MachineConfig) error) error {
	for _, m := range members {
		cfg, err := w.ReadConfig(ctx, m)
		if err == nil {
			err = check(cfg)
		}

		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}

	return nil
}

// Version calls Version on one member: whether it answers this client.
func (w *Walker) Version(ctx context.Context, m Member) error {
	cctx, cancel := w.Route(ctx, m)
	defer cancel()

	resp, err := w.client.Version(cctx)

	return w.Check(resp, err)
}

// Unreachable calls every member and names those that do not answer,
// each with its error.
func (w *Walker) Unreachable(ctx context.Context, members []Member) []string {
	var down []string

	for _, m := range members {
		if err := w.Version(ctx, m); err != nil {
			down = append(down, fmt.Sprintf("%s: %v", m, err))
		}
	}

	return down
}
