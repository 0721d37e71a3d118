package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// envDecision carries the start decision from the machined that took it
// to the active slot's machined it executes, so that one start of the
// node takes the decision (and counts a trial's start) once.
const envDecision = "AEGIS_SLOT_DECISION"

// chooseSlot takes this start's decision on the node's installed versions
// (see machined/upgrade) and points opts at the active one. When this
// binary is not the active slot's machined it executes that one instead,
// and returns only on failure. A node never upgraded has no slots: the
// zero Slot says so.
func chooseSlot(opts *options, now time.Time) (upgrade.Slot, upgrade.Decision, error) {
	store := upgrade.Store{Dir: layout.Layout{State: opts.state}.UpgradeDir()}

	s, ok, err := store.Load()
	if err != nil || !ok {
		return upgrade.Slot{}, upgrade.Decision{}, err
	}

	d, taken := decisionFromEnv()
	if !taken {
		if s, d = upgrade.Start(s, now, opts.trialTimeout); d.Outcome != upgrade.Unchanged {
			if err := store.Save(s); err != nil {
				return upgrade.Slot{}, d, err
			}
		}
	}

	if err := os.Unsetenv(envDecision); err != nil {
		return upgrade.Slot{}, d, err
	}

	if !runningFrom(s.Active.BinDir) {
		return upgrade.Slot{}, d, execSlot(s.Active, &d)
	}

	opts.binDir, opts.imageDir = s.Active.BinDir, s.Active.ImageDir

	return s.Active, d, nil
}

// switchSlot executes the active slot's machined after the node asked
// for another version: that machined takes the start decision itself
// (promoting a staged version). It returns only on failure.
//
// The listening sockets held go on to that machined (passListeners).
func switchSlot(state string, held *inherit.Set) error {
	s, ok, err := upgrade.Store{Dir: layout.Layout{State: state}.UpgradeDir()}.Load()
	if err == nil && !ok {
		err = errors.New("no slots are recorded")
	}

	if err != nil {
		return fmt.Errorf("switching versions: %w", err)
	}

	if err := passListeners(held); err != nil {
		return fmt.Errorf("switching versions: %w", err)
	}

	return execSlot(s.Active, nil)
}

// passListeners names the sockets held in EnvListeners for the machined
// executed next, and keeps them open across the exec. Nothing starts a
// child between this and the exec (the node's services are stopped), so
// the sockets reach that machined alone.
func passListeners(held *inherit.Set) error {
	v, err := held.PassOn()
	if err != nil || v == "" {
		return err
	}

	return os.Setenv(inherit.EnvListeners, v)
}

// adoptListeners takes over the sockets a machined of another version
// handed over, once this machined is the one that runs the node (the
// active slot's). A bad EnvListeners value refuses the start: it can only
// come from a machined of this node that went wrong.
func adoptListeners(held *inherit.Set) error {
	v, ok := os.LookupEnv(inherit.EnvListeners)
	if !ok {
		return nil
	}

	if err := os.Unsetenv(inherit.EnvListeners); err != nil {
		return err
	}

	if err := held.Adopt(v); err != nil {
		return fmt.Errorf("%w; start machined without %s to listen anew", err, inherit.EnvListeners)
	}

	return nil
}

// execSlot replaces this process by slot's machined, with this process's
// arguments but --bin-dir and --image-dir set to slot's, and d (when
// non-nil) passed on as already taken.
func execSlot(slot upgrade.Slot, d *upgrade.Decision) error {
	if d != nil {
		if err := os.Setenv(envDecision, fmt.Sprintf("%d\t%s", d.Outcome, d.Reason)); err != nil {
			return err
		}
	}

	args := append(withoutDirFlags(os.Args[1:]), "--bin-dir="+slot.BinDir, "--image-dir="+slot.ImageDir)
	exe := filepath.Join(slot.BinDir, "machined")

	err := syscall.Exec(exe, append([]string{exe}, args...), os.Environ()) //nolint:gosec // the node's own installed machined

	return fmt.Errorf("starting %s of slot %s (%s): %w; remove %s to boot the installed version",
		exe, slot.Name, slot.Version, err, filepath.Join(filepath.Dir(filepath.Dir(slot.BinDir)), "state.json"))
}

// decisionFromEnv reads the decision a machined of this start passed on.
func decisionFromEnv() (upgrade.Decision, bool) {
	v, ok := os.LookupEnv(envDecision)
	if !ok {
		return upgrade.Decision{}, false
	}

	outcome, reason, _ := strings.Cut(v, "\t")
	n, err := strconv.Atoi(outcome)

	return upgrade.Decision{Outcome: upgrade.Outcome(n), Reason: reason}, err == nil
}

// runningFrom reports whether this process is binDir's machined.
func runningFrom(binDir string) bool {
	exe, err := os.Executable()
	if err != nil {
		return false
	}

	self, err1 := os.Stat(exe)
	active, err2 := os.Stat(filepath.Join(binDir, "machined"))

	return err1 == nil && err2 == nil && os.SameFile(self, active)
}

// withoutDirFlags drops --bin-dir and --image-dir (any spelling) from
// args, so that those of a slot replace them.
func withoutDirFlags(args []string) []string {
	var out []string

	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || (name != "bin-dir" && name != "image-dir") {
			out = append(out, args[i])

			continue
		}

		if !hasValue {
			i++ // the value is the next argument
		}
	}

	return out
}
