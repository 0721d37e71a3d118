package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
)

// ErrRebootAfterReset is what Run returns when a reset asked for a reboot:
// the state directory has been wiped and machined must start afresh from
// its config, with nothing the old process held in memory or open
// (certificates, the revocation list, logs in the wiped directory).
var ErrRebootAfterReset = errors.New("node: reset done; boot again from the config")

// resetRequest is a reset's part of a lifecycle request.
type resetRequest struct {
	graceful, reboot bool
}

// CheckReset refuses a graceful reset of a control plane whose leaving
// etcd would break quorum: the only voter, or one whose other voters do
// not answer. A reset that is not graceful does not leave etcd.
func (n *Node) CheckReset(ctx context.Context, graceful bool) error {
	if !graceful || !n.config.current().Machine.Type.IsControlPlane() {
		return nil
	}

	e := n.etcd.member()
	if e == nil {
		return nil // no member yet: nothing to leave
	}

	if err := e.CheckLeave(ctx); err != nil {
		if errors.Is(err, etcd.ErrQuorum) {
			return fmt.Errorf("%w; a graceful reset leaves etcd first (reset with graceful=false to wipe this node anyway)", err)
		}

		return err
	}

	return nil
}

// Reset asks the node to leave the cluster, wipe its state and end
// machined or boot again.
func (n *Node) Reset(actor string, graceful, reboot bool) {
	n.request(lifecycleRequest{actor: actor, shutdown: true, reset: &resetRequest{graceful: graceful, reboot: reboot}})
}

// leave takes the node out of the cluster before its boot ends, while its
// etcd and heartbeats still work: it stops its heartbeats, removes its
// member entry (a control plane through its etcd, a worker through trustd)
// and, when graceful, leaves etcd. It reports whether the reset may go on.
func (n *Node) leave(ctx context.Context, req lifecycleRequest) bool {
	n.machineStatus(machine.MachineStatusEvent_RESETTING, req.actor)
	n.bus.Publish(&machine.SequenceEvent{Sequence: "reset", Action: machine.SequenceEvent_START}, req.actor)

	n.beats.setLeaving(true)

	if b := n.config.boot(); b != nil && len(b.addresses) > 0 {
		if err := n.beats.removeOwnEntry(ctx, b); err != nil {
			n.log.Warn("reset: removing the member entry failed; it ages out", slog.String(logkey.Error, err.Error()))
		}
	}

	if !n.config.current().Machine.Type.IsControlPlane() {
		return true
	}

	if !req.reset.graceful {
		return true
	}

	e := n.etcd.member()
	if e == nil {
		return true
	}

	if err := e.Leave(ctx, n.services); err != nil {
		n.log.Error("reset abandoned: leaving etcd failed; booting again unchanged", slog.String(logkey.Error, err.Error()))
		n.bus.Publish(&machine.SequenceEvent{Sequence: "reset", Action: machine.SequenceEvent_STOP,
			Error: &common.Error{Code: common.Code_FATAL, Message: "leaving etcd: " + err.Error()}}, req.actor)

		n.beats.setLeaving(false)

		return false
	}

	return true
}

// wipe removes everything in the state directory, the EPHEMERAL part of a
// Talos node: keys, certificates, etcd's data, tokens, logs, the
// revocation list. It never follows a link out of the directory, and keeps
// the machine config (STATE), also when it was put inside the directory.
func (n *Node) wipe() error {
	if err := wipeExcept(n.cfg.State, n.cfg.ConfigPath); err != nil {
		return fmt.Errorf("node: reset: wiping the state directory: %w", err)
	}

	n.log.Info("reset: state directory wiped", slog.String(logkey.StateDir, n.cfg.State))

	return nil
}

// wipeExcept removes every entry of dir but the file keep and the
// directories that lead to it. Links are removed, never followed.
func wipeExcept(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}

	var errs []error

	for _, e := range entries {
		path := filepath.Join(dir, e.Name())

		switch {
		case path == keep:
			continue
		case e.IsDir() && strings.HasPrefix(keep, path+string(filepath.Separator)):
			errs = append(errs, wipeExcept(path, keep))
		default:
			errs = append(errs, os.RemoveAll(path))
		}
	}

	return errors.Join(errs...)
}
