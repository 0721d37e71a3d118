package machineapi

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// Upgrader is the node's side of Upgrade and Rollback: its slots of
// installed versions (see machined/upgrade).
type Upgrader interface {
	// Upgrade installs the bundle ref names (a path on the node, or a
	// reference the BundleService's Upload returned) into a free slot
	// and makes it the version of machined's next start; without stage,
	// the node switches to it after replying. It returns the bundle's
	// version.
	Upgrade(ctx context.Context, ref string, stage bool, actor string) (string, error)
	// Rollback makes the kept version active again and switches to it
	// after replying; it returns that version.
	Rollback(ctx context.Context, actor string) (string, error)
}

// errNoUpgrader refuses Upgrade and Rollback on a node built without slots.
var errNoUpgrader = refuse(ErrNotHere, "this node keeps no slots of installed versions; it cannot be upgraded through the API")

// Upgrade installs an Aegis release bundle and switches the node to it,
// keeping the running version for a rollback. Of Talos's request, image
// names the bundle, stage defers the switch to machined's next start, and
// preserve is always what happens (the state directory is never wiped);
// force and a power-cycle reboot mode are refused: nothing here skips a
// check, and a user-mode node has no power to cycle.
func (s *Server) Upgrade(ctx context.Context, req *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	resp, err := s.upgrade(ctx, req)

	return resp, s.toStatus("Upgrade", err)
}

func (s *Server) upgrade(ctx context.Context, req *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	switch {
	case s.cfg.Upgrader == nil:
		return nil, errNoUpgrader
	case req.GetForce():
		return nil, refuse(ErrBadRequest, "Upgrade: force is not supported: an Aegis node never skips the checks of an upgrade "+
			"(bundle digests, version skew, etcd quorum); fix what they name and try again")
	case req.GetRebootMode() == machine.UpgradeRequest_POWERCYCLE:
		return nil, refuse(ErrBadRequest, "Upgrade: a power-cycle reboot needs hardware; a user-mode node restarts machined instead")
	case req.GetImage() == "":
		return nil, refuse(ErrBadRequest, "Upgrade: image must name the release bundle: a path on the node, or the reference Upload returned")
	}

	actor := s.newID()

	v, err := s.cfg.Upgrader.Upgrade(ctx, req.GetImage(), req.GetStage(), actor)
	if err != nil {
		return nil, err
	}

	ack := fmt.Sprintf("Upgrade to %s installed; the node restarts on it now and goes back by itself unless it is healthy in time", v)
	if req.GetStage() {
		ack = fmt.Sprintf("Upgrade to %s staged; it becomes active at machined's next start", v)
	}

	return &machine.UpgradeResponse{Messages: []*machine.Upgrade{{Ack: ack, ActorId: actor}}}, nil
}

// Rollback makes the version the node kept active again and restarts
// machined on it, after replying.
func (s *Server) Rollback(ctx context.Context, _ *machine.RollbackRequest) (*machine.RollbackResponse, error) {
	if s.cfg.Upgrader == nil {
		return nil, s.toStatus("Rollback", errNoUpgrader)
	}

	if _, err := s.cfg.Upgrader.Rollback(ctx, s.newID()); err != nil {
		return nil, s.toStatus("Rollback", err)
	}

	return &machine.RollbackResponse{Messages: []*machine.Rollback{{}}}, nil
}
