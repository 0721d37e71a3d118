package upgrade

import "github.com/aegis-os/aegis/client/resourcetypes"

// Status is s as the node's resource API serves it
// (resourcetypes.UpgradeStatus): the versions by name, the trial, the
// last rollback. It is made from the node's own state file alone.
func (s State) Status() resourcetypes.UpgradeStatusSpec {
	spec := resourcetypes.UpgradeStatusSpec{ActiveSlot: s.Active.Name, ActiveVersion: s.Active.Version}

	if s.Previous != nil {
		spec.PreviousVersion = s.Previous.Version
	}

	if s.Staged != nil {
		spec.StagedVersion = s.Staged.Version
	}

	if t := s.Trial; t != nil {
		spec.OnTrial, spec.TrialSince, spec.TrialDeadline, spec.TrialStarts = true, t.Since, t.Deadline, t.Starts
	}

	if r := s.LastRollback; r != nil {
		spec.LastRollback = resourcetypes.UpgradeRollback{At: r.At, From: r.From, To: r.To, Reason: r.Reason, ByNode: r.ByNode}
	}

	return spec
}
