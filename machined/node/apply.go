package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/machineapi"
)

// diffContext is the unchanged lines shown around each change of a diff.
const diffContext = 3

// changeSet is what a new config changes, by class.
type changeSet struct {
	all, live, reboot, identity []string
}

func (c changeSet) needsReboot() bool { return len(c.reboot) > 0 }

// applying is one ApplyConfig call once its config is checked: what it
// changes and how.
type applying struct {
	ch       machineapi.ConfigChange
	cur, cfg *certs.MachineConfig
	changes  changeSet
	mode     machine.ApplyConfigurationRequest_Mode
	etcd     etcdPlan
	details  string
}

// live reports whether the config takes effect without a reboot.
func (a *applying) live() bool {
	return a.mode == machine.ApplyConfigurationRequest_NO_REBOOT || a.mode == machine.ApplyConfigurationRequest_TRY
}

// ApplyConfig validates a whole machine config and applies it as the
// change's mode asks (machineapi.Configurator). Nothing changes, on disk
// or in memory, unless the config is valid and the mode allows every
// changed field.
func (n *Node) ApplyConfig(ctx context.Context, ch machineapi.ConfigChange) (machineapi.ConfigResult, error) {
	n.trials.mu.Lock()
	defer n.trials.mu.Unlock()

	a, err := n.checkApply(ch)
	if err != nil {
		return machineapi.ConfigResult{}, err
	}

	if ch.DryRun {
		return machineapi.ConfigResult{Mode: a.mode, Details: "Dry run summary:\n" + a.details}, nil
	}

	if err := a.etcd.acquire(ctx); err != nil {
		return machineapi.ConfigResult{}, err
	}
	defer a.etcd.release()

	if err := n.putInEffect(a); err != nil {
		return machineapi.ConfigResult{}, err
	}

	if a.live() {
		restarted, err := n.settle(ctx, a.etcd)
		if err != nil {
			return machineapi.ConfigResult{}, err
		}

		a.details = restarted + a.details
	}

	n.log.Info("machine config applied", slog.String(logkey.ApplyMode, a.mode.String()),
		slog.String(logkey.ConfigFields, strings.Join(a.changes.all, ",")))

	return machineapi.ConfigResult{Mode: a.mode, Details: a.details}, nil
}

// checkApply parses and checks the new config against the one in effect,
// and decides the mode and what happens to etcd; it changes nothing.
func (n *Node) checkApply(ch machineapi.ConfigChange) (*applying, error) {
	cfg, err := certs.ParseMachineConfig("the new machine config", ch.Data, n.clock.Now())
	if err != nil {
		return nil, err
	}

	a := &applying{ch: ch, cur: n.config.current(), cfg: cfg}

	if err := cfg.CheckPreviousTokensExpiry("the new machine config", a.cur, n.clock.Now()); err != nil {
		return nil, err
	}

	if a.changes, err = classify(a.cur, cfg); err != nil {
		return nil, err
	}

	if a.mode, err = chooseMode(ch.Mode, a.changes); err != nil {
		return nil, err
	}

	if a.live() {
		a.etcd = n.etcd.plan(a.cur, cfg)
	}

	a.details = describe(a.mode, a.changes, ch.TryTimeout) + a.etcd.describe() + configDiff(a.cur, cfg)

	return a, nil
}

// putInEffect writes the config file (but for a TRY) and puts the config
// in effect as its mode asks: live, on trial, or at a reboot.
func (n *Node) putInEffect(a *applying) error {
	if a.mode != machine.ApplyConfigurationRequest_TRY {
		n.endTrial()

		if err := n.writeConfig(a.ch.Data); err != nil {
			return err
		}
	}

	switch a.mode {
	case machine.ApplyConfigurationRequest_NO_REBOOT:
		n.applyLive(a.cfg, a.changes)
	case machine.ApplyConfigurationRequest_TRY:
		n.startTrial(a.cur, a.ch.TryTimeout)
		n.applyLive(a.cfg, a.changes)
	case machine.ApplyConfigurationRequest_REBOOT:
		n.Reboot("")
	}

	return nil
}

// classify sorts the changed fields. A change of machine.type within the
// control planes (init and controlplane) only needs a reboot.
func classify(cur, cfg *certs.MachineConfig) (changeSet, error) {
	fields, err := certs.ChangedFields(cur, cfg)
	if err != nil {
		return changeSet{}, err
	}

	c := changeSet{all: fields}

	for _, f := range fields {
		class := certs.ClassOf(f)
		if f == "machine.type" && cur.Machine.Type.IsControlPlane() == cfg.Machine.Type.IsControlPlane() {
			class = certs.ChangeReboot
		}

		// The issuing etcd CA changes live, as the second step of a
		// rotation, and only so.
		if certs.IsEtcdCAField(f) {
			if err := certs.CheckEtcdCAChange(cur, cfg); err != nil {
				return changeSet{}, err
			}

			class = certs.ChangeLive
		}

		if certs.IsOSCAField(f) && certs.IsCARotationStep(cur, cfg) {
			class = certs.ChangeLive
		}

		switch class {
		case certs.ChangeLive:
			c.live = append(c.live, f)
		case certs.ChangeReboot:
			c.reboot = append(c.reboot, f)
		case certs.ChangeIdentity:
			c.identity = append(c.identity, f)
		}
	}

	if len(c.identity) > 0 {
		return changeSet{}, machineapi.Refuse(machineapi.ErrBadRequest, fmt.Sprintf(
			"the new machine config changes the node's identity (%s): applying a config never turns a node between control plane "+
				"and worker, moves it to another cluster or address, or swaps its CAs; a CA changes by rotation (aegisctl rotate-ca): "+
				"machine.ca takes a CA already in machine.acceptedCAs, and the CA it replaces stays there "+
				"(cluster.etcd.acceptedCAs for the etcd CA)",
			strings.Join(c.identity, ", ")))
	}

	return c, nil
}

// chooseMode resolves AUTO and refuses a mode that cannot apply every
// changed field.
func chooseMode(mode machine.ApplyConfigurationRequest_Mode, c changeSet) (machine.ApplyConfigurationRequest_Mode, error) {
	switch mode {
	case machine.ApplyConfigurationRequest_AUTO:
		if c.needsReboot() {
			return machine.ApplyConfigurationRequest_REBOOT, nil
		}

		return machine.ApplyConfigurationRequest_NO_REBOOT, nil
	case machine.ApplyConfigurationRequest_NO_REBOOT, machine.ApplyConfigurationRequest_TRY:
		if c.needsReboot() {
			return mode, machineapi.Refuse(machineapi.ErrNotHere, fmt.Sprintf(
				"mode %s: these fields take effect only at a reboot: %s (apply with mode auto, reboot or staged)",
				modeName(mode), strings.Join(c.reboot, ", ")))
		}
	}

	return mode, nil
}

func modeName(m machine.ApplyConfigurationRequest_Mode) string {
	return strings.ReplaceAll(strings.ToLower(m.String()), "_", "-")
}

// describe is the first lines of the answer: what the mode does with
// which fields.
func describe(mode machine.ApplyConfigurationRequest_Mode, c changeSet, try time.Duration) string {
	var b strings.Builder

	switch {
	case len(c.all) == 0:
		b.WriteString("No changes.\n")
	case mode == machine.ApplyConfigurationRequest_STAGED:
		fmt.Fprintf(&b, "Staged the configuration, to be applied at the next reboot: %s.\n", strings.Join(c.all, ", "))
	case mode == machine.ApplyConfigurationRequest_REBOOT:
		fmt.Fprintf(&b, "Applied the configuration with a reboot: %s.\n", strings.Join(c.all, ", "))
	case mode == machine.ApplyConfigurationRequest_TRY:
		fmt.Fprintf(&b, "Applied the configuration without a reboot, on trial for %s: %s. "+
			"It is rolled back then unless applied again with mode auto or no-reboot.\n", try, strings.Join(c.live, ", "))
	default:
		fmt.Fprintf(&b, "Applied the configuration without a reboot: %s.\n", strings.Join(c.live, ", "))
	}

	return b.String()
}

// configDiff is the difference of two configs, secrets redacted.
func configDiff(cur, cfg *certs.MachineConfig) string {
	a, errA := cur.Redacted()
	b, errB := cfg.Redacted()

	if err := errors.Join(errA, errB); err != nil {
		return "(no difference shown: " + err.Error() + ")\n"
	}

	d := certs.LineDiff(string(a), string(b), diffContext)
	if d == "" {
		return ""
	}

	return "Config diff:\n" + d
}

// writeConfig replaces the config file atomically (0600: it holds the
// token and, on control planes, the CA keys), keeping the one it replaces
// in the state directory (layout.PreviousConfig).
func (n *Node) writeConfig(data []byte) error {
	old, err := os.ReadFile(n.cfg.ConfigPath)

	switch {
	case err == nil:
		if err := atomicfile.Write(n.layout.PreviousConfig(), old, 0o600, atomicfile.Options{Overwrite: true}); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("node: reading the config file: %w", err)
	}

	return atomicfile.Write(n.cfg.ConfigPath, data, 0o600, atomicfile.Options{Overwrite: true})
}

// applyLive puts the live fields of cfg in effect: the accepted CAs apid
// and trustd verify against, trustd's static and previous tokens and
// worker SANs, the time service's servers, and the machine config the
// resource API shows. Fields that need a reboot keep the values of the
// current boot in what the boot built.
func (n *Node) applyLive(cfg *certs.MachineConfig, c changeSet) {
	svc := n.config.setLive(cfg)

	// The resource API shows the config in effect, never the one booted.
	n.setMachineConfig(cfg)

	accepted := cfg.AcceptedCAs().PEM()
	if c := n.config.certController(); c != nil {
		accepted = c.acceptedFor(cfg)
	}

	n.store.Update(func(r *node.Resources) {
		r.AcceptedCas = accepted

		if osCA := cfg.OSCA(); osCA != nil {
			r.TrustdToken, r.PreviousTrustdTokens = cfg.Machine.Token, previousTokens(cfg)
			r.WorkerSans = slices.Clone(cfg.Cluster.WorkerSANs)
			// trustd signs from the CA in effect: a rotation step.
			r.OsCa = &node.KeyPair{Crt: osCA.CertPEM, Key: osCA.KeyPEM}
		}
	})

	timeChanged := slices.ContainsFunc(c.live, func(f string) bool { return strings.HasPrefix(f, "machine.time") })
	if timeChanged && svc != nil {
		t := cfg.Machine.Time
		if err := svc.Reconfigure(t.Servers, t.TrustHostClock, cfg.MaxTimeOffset(), t.PollInterval); err != nil {
			n.log.Error("reconfiguring the time service", slog.String(logkey.Error, err.Error()))
		}
	}
}

// MachineConfig returns the config in effect (machineapi.Configurator).
func (n *Node) MachineConfig(redact bool) ([]byte, bool, error) {
	n.trials.mu.Lock()
	defer n.trials.mu.Unlock()

	cur := n.config.current()

	var (
		data []byte
		err  error
	)

	if redact {
		data, err = cur.Redacted()
	} else {
		data, err = cur.Marshal()
	}

	if err != nil {
		return nil, false, err
	}

	onDisk, err := certs.LoadMachineConfig(n.cfg.ConfigPath, n.clock.Now())
	if err != nil {
		return data, true, nil //nolint:nilerr // a file that does not load differs from the config in effect
	}

	fields, err := certs.ChangedFields(cur, onDisk)

	return data, err == nil && len(fields) > 0, nil
}

// previousTokens is cfg's machine.previousTokens as trustd receives them.
func previousTokens(cfg *certs.MachineConfig) []*node.PreviousToken {
	prev := cfg.PreviousTrustdTokens()
	if len(prev) == 0 {
		return nil
	}

	out := make([]*node.PreviousToken, 0, len(prev))
	for _, p := range prev {
		out = append(out, &node.PreviousToken{Token: p.Token.Reveal(), Expires: timestamppb.New(p.Expires)})
	}

	return out
}
