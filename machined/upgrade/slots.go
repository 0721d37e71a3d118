// Package upgrade keeps the versions of Aegis a node has installed, in
// slots under its state directory, and decides which one machined runs:
// the active one (A), the one kept for a rollback (B), and one staged to
// become active at the next start. A new version is on trial until the
// node confirms it healthy; a trial that runs out, or a version that
// starts too many times without confirming, sends the node back to B by
// itself. The decisions are pure functions of the recorded State and the
// time (Start, Stage, Confirm, RollBack), so that a test drives them with
// a fake clock; Store keeps the State in a file.
package upgrade

import (
	"errors"
	"fmt"
	"time"
)

// InstalledSlot names the version machined was installed with, run from
// where it was installed (its --bin-dir), before any upgrade.
const InstalledSlot = "installed"

// slotNames are the two slot directories an upgrade installs into, in turn.
var slotNames = [2]string{"a", "b"}

// Slot is one installed version of the node's binaries and images.
type Slot struct {
	// Name is InstalledSlot, or the slot directory's name ("a", "b").
	Name string `json:"name"`
	// BinDir holds machined, apid, trustd and etcd.
	BinDir string `json:"bin_dir"`
	// ImageDir holds the image archives; empty means machined's default.
	ImageDir string `json:"image_dir,omitempty"`
	// Version is the Aegis version of the binaries.
	Version string `json:"version"`
}

// Trial is a new version's probation: it must be confirmed healthy before
// Deadline and within MaxStarts starts of machined.
type Trial struct {
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
	// Starts counts the starts of machined on this version so far.
	Starts int `json:"starts"`
}

// State is a node's slots as recorded in its state directory.
type State struct {
	// Active is what machined runs.
	Active Slot `json:"active"`
	// Previous is what a rollback returns to (B); nil when there is none.
	Previous *Slot `json:"previous,omitempty"`
	// Staged becomes Active at the next start of machined.
	Staged *Slot `json:"staged,omitempty"`
	// Trial is set while Active has not been confirmed healthy.
	Trial *Trial `json:"trial,omitempty"`
	// LastRollback is the node's last rollback, for the operator; nil
	// when it never went back.
	LastRollback *Rollback `json:"last_rollback,omitempty"`
}

// Sentinels of the decisions; the API maps both to FailedPrecondition.
var (
	// ErrOnTrial refuses a new upgrade while the last one is on trial.
	ErrOnTrial = errors.New("upgrade: the active version is still on trial")
	// ErrNoPrevious refuses a rollback with no version kept.
	ErrNoPrevious = errors.New("upgrade: no previous version is kept to roll back to")
)

// Outcome is what Start decided.
type Outcome int

// Start's outcomes.
const (
	// Unchanged: the active version runs, confirmed.
	Unchanged Outcome = iota
	// Promoted: the staged version became active and its trial began.
	Promoted
	// OnTrial: the active version is still on trial; this start counts.
	OnTrial
	// RolledBack: the trial failed; the previous version is active again.
	RolledBack
)

// Decision is Start's outcome, with the reason of a rollback.
type Decision struct {
	Outcome Outcome
	Reason  string
}

// Start is the decision machined takes once per start, before it runs
// anything: promote the staged version (the running one becomes
// Previous), count a start of a version on trial, or roll back a trial
// that has run out of time or starts.
func Start(s State, now time.Time, timeout time.Duration) (State, Decision) {
	switch {
	case s.Staged != nil:
		prev := s.Active
		s.Active, s.Previous, s.Staged = *s.Staged, &prev, nil
		s.Trial = &Trial{Since: now, Deadline: now.Add(timeout), Starts: 1}

		return s, Decision{Outcome: Promoted}
	case s.Trial == nil:
		return s, Decision{Outcome: Unchanged}
	}

	t := *s.Trial
	t.Starts++

	var reason string

	switch {
	case t.Starts > MaxTrialStarts:
		reason = fmt.Sprintf("%s started %d times without becoming healthy", s.Active.Version, MaxTrialStarts)
	case !now.Before(t.Deadline):
		reason = fmt.Sprintf("%s was not healthy within %s", s.Active.Version, t.Deadline.Sub(t.Since))
	default:
		s.Trial = &t

		return s, Decision{Outcome: OnTrial}
	}

	rolled, err := autoRollBack(s, now, reason)
	if err != nil {
		// A trial always has a previous version (Start made it); a
		// state file edited by hand may not: the version stays.
		s.Trial = nil

		return s, Decision{Outcome: Unchanged, Reason: err.Error()}
	}

	return rolled, Decision{Outcome: RolledBack, Reason: reason}
}

// Expire is the decision at a trial's deadline while machined runs: roll
// back unless the trial was confirmed meanwhile (then ok is false).
func Expire(s State, now time.Time) (State, string, bool) {
	if s.Trial == nil || now.Before(s.Trial.Deadline) {
		return s, "", false
	}

	reason := fmt.Sprintf("%s was not healthy within %s", s.Active.Version, s.Trial.Deadline.Sub(s.Trial.Since))

	rolled, err := autoRollBack(s, now, reason)
	if err != nil {
		return s, "", false
	}

	return rolled, reason, true
}

// Confirm ends the active version's trial: it is healthy.
func Confirm(s State) State {
	s.Trial = nil

	return s
}

// Stage records next to become active at the next start. It refuses
// while the active version is on trial: a trial is confirmed or rolled
// back before anything else is installed. A previous version kept in
// next's slot is gone (the new one was installed over it): none is kept
// then until the switch makes the active one previous.
func Stage(s State, next Slot) (State, error) {
	if s.Trial != nil {
		return s, fmt.Errorf("%w until %s (started %d times); wait for it to be confirmed or rolled back", ErrOnTrial, s.Trial.Deadline.UTC().Format(time.RFC3339), s.Trial.Starts)
	}

	s.Staged = &next
	if s.Previous != nil && s.Previous.Name == next.Name {
		s.Previous = nil
	}

	return s, nil
}

// RollBack is an operator's rollback: the previous version becomes active
// and the active one is kept as previous, so that the rollback itself can
// be undone. Nothing staged survives it, and no trial follows: the
// version returned to has run on this node before. It is recorded as of
// now, for reason.
func RollBack(s State, now time.Time, reason string) (State, error) {
	if s.Previous == nil {
		return s, fmt.Errorf("%w (the node runs %s)", ErrNoPrevious, s.Active.Version)
	}

	cur := s.Active
	s.Active, s.Previous, s.Staged, s.Trial = *s.Previous, &cur, nil, nil
	s.LastRollback = &Rollback{At: now, From: cur.Version, To: s.Active.Version, Reason: reason}

	return s, nil
}

// autoRollBack is the node's own rollback of a failed trial: unlike an
// operator's, it does not keep the failed version as previous, so that a
// Rollback cannot return to it by mistake; its slot is reused by the next
// upgrade.
func autoRollBack(s State, now time.Time, reason string) (State, error) {
	s, err := RollBack(s, now, reason)
	if err != nil {
		return s, err
	}

	s.Previous = nil
	s.LastRollback.ByNode = true

	return s, nil
}

// NextSlot is the slot directory an upgrade installs into: the one that is
// neither active nor about to be. Previous's slot is reused: the running
// version becomes the one kept.
func NextSlot(s State) string {
	if s.Active.Name == slotNames[0] {
		return slotNames[1]
	}

	return slotNames[0]
}
