package machineapi

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

// Partition labels of a Talos node that a reset may name, as Aegis maps
// them onto a node's state directory (machined/layout).
const (
	// LabelEphemeral is everything in the state directory: the node's
	// certificates and keys, etcd's data, trustd's tokens and audit, the
	// logs, the revocation list, containerd's state. A reset always wipes it.
	LabelEphemeral = "EPHEMERAL"
	// LabelState is the machine config, given to machined apart from its
	// state directory (and kept also when it lies inside): a reset keeps
	// it, so that the node can boot again and join with its token.
	LabelState = "STATE"
)

// Resetter is what Reset asks of the node.
type Resetter interface {
	// CheckReset refuses, before the reply, a reset the node cannot do
	// now: a graceful one of a control plane whose leaving etcd would
	// break quorum.
	CheckReset(ctx context.Context, graceful bool) error
	// Reset acts after the reply has been sent: a graceful control plane
	// leaves etcd, the node leaves the member list, stops its services,
	// wipes its state directory, then ends machined or, with reboot,
	// boots again from its config. actorID tags the events it causes.
	Reset(actorID string, graceful, reboot bool)
}

// Reset wipes the node's state and shuts it down or reboots it. It acts
// after replying; what it cannot do is refused before.
func (s *Server) Reset(ctx context.Context, req *machine.ResetRequest) (*machine.ResetResponse, error) {
	if err := checkReset(req); err != nil {
		return nil, s.toStatus("Reset", err)
	}

	if s.cfg.Reset == nil {
		return nil, s.toStatus("Reset", refuse(ErrNotHere, "Reset: this node cannot be reset"))
	}

	if err := s.cfg.Reset.CheckReset(ctx, req.GetGraceful()); err != nil {
		return nil, s.toStatus("Reset", err)
	}

	actor := s.newID()
	s.cfg.Reset.Reset(actor, req.GetGraceful(), req.GetReboot())

	return &machine.ResetResponse{Messages: []*machine.Reset{{ActorId: actor}}}, nil
}

// checkReset refuses what a node run by machined has not got: user disks,
// and partitions other than EPHEMERAL.
func checkReset(req *machine.ResetRequest) error {
	if req.GetMode() == machine.ResetRequest_USER_DISKS || len(req.GetUserDisksToWipe()) > 0 {
		return refuse(ErrBadRequest, "Reset: an Aegis node has no user disks; a reset wipes its state directory")
	}

	for i, p := range req.GetSystemPartitionsToWipe() {
		switch p.GetLabel() {
		case LabelEphemeral:
		case LabelState:
			return refusef(ErrBadRequest, "Reset: system_partitions_to_wipe[%d]: STATE is the machine config, which a reset always keeps so that the node can boot again (remove the file on the host)", i)
		default:
			return refusef(ErrBadRequest, "Reset: system_partitions_to_wipe[%d]: unknown label %q; an Aegis node has EPHEMERAL (its state directory) and STATE (its config, never wiped)", i, p.GetLabel())
		}
	}

	return nil
}
