package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// hostUnitDir holds systemd's own units on the build machine.
const hostUnitDir = "/usr/lib/systemd/system"

// verify unpacks debs into a clean root under work, as dpkg would install
// them, and runs systemd-analyze verify on the node package's units there:
// the unit parses, its ExecStart is an executable in the root, and the
// man pages its Documentation= names are installed. The root holds
// nothing but the packages and systemd's own targets and slices, which
// every system the packages land on has. A missing tool is an error.
func verify(debs []string, work string) error {
	for _, tool := range []string{"dpkg-deb", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("verifying the packages needs %s: %w (make release installs it: scripts/deps.sh release)", tool, err)
		}
	}

	root, err := os.MkdirTemp(work, "root-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root) //nolint:errcheck // a temporary root

	for _, d := range debs {
		if err := runTool("dpkg-deb", "-x", d, root); err != nil {
			return err
		}
	}

	if err := seedSystemdUnits(root); err != nil {
		return err
	}

	args := []string{"verify", "--root=" + root}
	for _, u := range unitNames() {
		args = append(args, u)
	}

	cmd := exec.Command("systemd-analyze", args...)
	// man, which checks Documentation=man:…, reads the root's pages.
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr", "share", "man"))

	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("systemd-analyze verify %s in the unpacked packages: %v: %s", strings.Join(unitNames(), " "), err, strings.TrimSpace(string(out)))
	}

	return nil
}

// seedSystemdUnits copies systemd's own targets and slices from the build
// machine into root: the units of the packages depend on them by default
// (sysinit.target, basic.target, …).
func seedSystemdUnits(root string) error {
	var seeded int

	for _, glob := range []string{"*.target", "*.slice"} {
		paths, err := filepath.Glob(filepath.Join(hostUnitDir, glob))
		if err != nil {
			return err
		}

		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				// A dangling alias: systemd does without it too.
				continue
			}

			if err := writeFile(filepath.Join(root, hostUnitDir, filepath.Base(p)), data); err != nil {
				return err
			}

			seeded++
		}
	}

	if seeded == 0 {
		return errors.New("no systemd targets in " + hostUnitDir + ": install systemd (scripts/deps.sh release)")
	}

	return nil
}

// runTool runs a tool, its output part of the error.
func runTool(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}

	return nil
}
