package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/aegis-os/aegis/rollout/upgrade"
)

// printUpgradePlan shows the bundle's version and every member in the
// order the upgrade takes them, with its batch, or why it is skipped.
func printUpgradePlan(out io.Writer, p *upgrade.Plan, batch int) {
	fmt.Fprintf(out, "Release bundle %s: Aegis %s\n", p.Bundle, p.Target)
	fmt.Fprintf(out, "Plan: %d of %d members to upgrade, control planes one at a time, then workers %d at a time, "+
		"each batch healthy on %s before the next.\n\n", p.Pending(), len(p.Entries), max(batch, 1), p.Target)

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()

	header(w, false, "BATCH\tHOSTNAME\tADDRESS\tROLE\tFROM\tTO")

	for _, e := range p.Entries {
		n, to := strconv.Itoa(e.Batch), p.Target
		if e.Skipped() {
			n, to = "-", "(on it already: skipped)"
		}

		role := "worker"
		if e.ControlPlane() {
			role = "controlplane"
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n, e.Name, e.Addr, role, e.From, to)
	}
}
