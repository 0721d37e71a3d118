package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// ErrSwitchVersion is what Run returns when the node must run another of
// its installed versions: an upgrade, a rollback, a failed trial.
// cmd/machined then executes the active slot's machined.
var ErrSwitchVersion = errors.New("node: switching to another installed version")

// upgrades are the node's installed versions as the API changes them.
type upgrades struct {
	// mu orders Upgrade, Rollback and the end of a trial.
	mu sync.Mutex
}

// slots is the node's store of installed versions.
func (n *Node) slots() upgrade.Store { return upgrade.Store{Dir: n.layout.UpgradeDir()} }

// running is the slot this machined runs: the one cmd/machined chose, or
// the installed version.
func (n *Node) running() upgrade.Slot {
	if n.cfg.Slot.BinDir != "" {
		return n.cfg.Slot
	}

	return upgrade.Slot{Name: upgrade.InstalledSlot, BinDir: n.cfg.BinDir, ImageDir: n.cfg.ImageDir, Version: version.Get().Tag}
}

// saveSlots records s, and serves it as the node's UpgradeStatus.
func (n *Node) saveSlots(s upgrade.State) error {
	if err := n.slots().Save(s); err != nil {
		return err
	}

	n.resourceErr("upgrade status", n.res.SetUpgradeStatus(s.Status()))

	return nil
}

// setUpgradeStatus serves the installed versions as recorded at this
// start (cmd/machined took its decision on them before the node began),
// or the running version alone on a node never upgraded. A state file
// that cannot be read is logged, and the resource left unset: a reader
// sees none rather than a guess.
func (n *Node) setUpgradeStatus() {
	s, err := n.slotState()
	if err == nil {
		err = n.res.SetUpgradeStatus(s.Status())
	}

	n.resourceErr("upgrade status", err)
}

// slotState is the recorded state, or the running version alone on a node
// never upgraded.
func (n *Node) slotState() (upgrade.State, error) {
	s, ok, err := n.slots().Load()
	if err != nil || ok {
		return s, err
	}

	return upgrade.State{Active: n.running()}, nil
}

// Upgrade installs the bundle ref names into a free slot and stages it;
// without stage the node then switches to it. A control plane first checks
// that etcd keeps its quorum without it and takes the upgrade lease.
func (n *Node) Upgrade(ctx context.Context, ref string, stage bool, actor string) (string, error) {
	n.upgrades.mu.Lock()
	defer n.upgrades.mu.Unlock()

	s, err := n.slotState()
	if err != nil {
		return "", err
	}

	if _, err := upgrade.Stage(s, upgrade.Slot{}); err != nil {
		return "", err
	}

	path, err := n.bundlePath(ref)
	if err != nil {
		return "", err
	}

	incoming := filepath.Join(n.slots().Dir, ".incoming")

	m, err := n.extract(path, incoming)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(incoming) //nolint:errcheck // gone after the rename; a refusal's leftover

	if !stage {
		if err := n.mayGo(ctx); err != nil {
			return "", err
		}
	}

	name, err := n.install(s, incoming, m.Version)
	if err != nil {
		if !stage {
			n.releaseLease(ctx)
		}

		return "", err
	}

	n.log.Info("upgrade installed", slog.String(logkey.Version, m.Version), slog.String(logkey.Slot, name), slog.Bool(logkey.Staged, stage))
	n.bus.Publish(&machine.SequenceEvent{Sequence: "upgrade", Action: machine.SequenceEvent_START}, actor)

	if !stage {
		n.request(lifecycleRequest{actor: actor, switchVersion: true})
	}

	return m.Version, nil
}

// install moves the checked bundle at incoming into the next slot and
// stages it; it returns the slot's name.
func (n *Node) install(s upgrade.State, incoming, v string) (string, error) {
	name := upgrade.NextSlot(s)
	dir := n.slots().SlotDir(name)

	if err := replaceDir(incoming, dir); err != nil {
		return "", err
	}

	slot := upgrade.Slot{Name: name, BinDir: filepath.Join(dir, bundle.BinDir), ImageDir: filepath.Join(dir, bundle.ImageDir), Version: v}

	s, err := upgrade.Stage(s, slot)
	if err != nil {
		return "", err
	}

	return name, n.saveSlots(s)
}

// bundlePath resolves Upgrade's image: an uploaded bundle's reference, or
// an absolute path on the node.
func (n *Node) bundlePath(ref string) (string, error) {
	if digest, ok := strings.CutPrefix(ref, upgrade.UploadRefPrefix); ok {
		p, err := n.uploads().Path(digest)
		if err != nil {
			return "", machineapi.Refuse(machineapi.ErrNotFound, err.Error())
		}

		return p, nil
	}

	if !filepath.IsAbs(ref) {
		return "", machineapi.Refuse(machineapi.ErrBadRequest,
			fmt.Sprintf("Upgrade: image %q is neither an absolute path on the node nor an upload reference (%s<sha256>)", ref, upgrade.UploadRefPrefix))
	}

	return ref, nil
}

// extract reads the bundle at path into dir, refusing one that does not
// match its manifest or is outside the skew from the running version.
func (n *Node) extract(path, dir string) (*bundle.Manifest, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}

	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}

	f, err := os.Open(path)
	if err != nil {
		return nil, machineapi.Refuse(machineapi.ErrNotFound, fmt.Sprintf("Upgrade: the bundle cannot be opened: %v", err))
	}
	defer f.Close()

	return bundle.Extract(f, dir, bundle.Options{Running: n.running().Version})
}

// replaceDir moves from to to, removing what to held.
func replaceDir(from, to string) error {
	if err := os.RemoveAll(to); err != nil {
		return fmt.Errorf("node: clearing slot %s: %w", to, err)
	}

	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("node: installing slot %s: %w", to, err)
	}

	return nil
}

// Rollback makes the kept version active and switches to it.
func (n *Node) Rollback(_ context.Context, actor string) (string, error) {
	n.upgrades.mu.Lock()
	defer n.upgrades.mu.Unlock()

	s, err := n.slotState()
	if err != nil {
		return "", err
	}

	if s, err = upgrade.RollBack(s, n.clock.Now(), "rollback asked through the API"); err != nil {
		return "", err
	}

	if err := n.saveSlots(s); err != nil {
		return "", err
	}

	n.log.Warn("rolling back", slog.String(logkey.Version, s.Active.Version), slog.String(logkey.Reason, s.LastRollback.Reason))
	n.bus.Publish(&machine.SequenceEvent{Sequence: "rollback", Action: machine.SequenceEvent_START}, actor)
	n.request(lifecycleRequest{actor: actor, switchVersion: true})

	return s.Active.Version, nil
}

// rolledBack publishes a rollback the node did by itself, and logs why.
func (n *Node) rolledBack(s upgrade.State, reason string) {
	n.log.Error("upgrade rolled back", slog.String(logkey.Version, s.Active.Version), slog.String(logkey.Reason, reason))
	n.bus.Publish(&machine.SequenceEvent{Sequence: "rollback", Action: machine.SequenceEvent_START,
		Error: &common.Error{Code: common.Code_FATAL, Message: reason}}, "")
}
