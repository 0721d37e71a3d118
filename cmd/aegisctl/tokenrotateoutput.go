package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// printPlan shows what the rotation will do: the new token (its id only),
// the end of the overlap, the members and the steps.
func (r *staticRotation) printPlan() {
	w := r.e.stdout
	how := "given with --token"

	if r.generated {
		how = "generated, shown when step 1 starts"
	}

	fmt.Fprintf(w, "New static token: %s (%s)\n", r.fresh, how)
	fmt.Fprintf(w, "Overlap: the old token stays accepted until %s\n\nMembers:\n", r.expires.Format(time.RFC3339))
	r.printMembers()

	drop := "3. every control plane: drop the old token; it is refused from then on"
	if r.flags.keepOverlap {
		drop = "3. skipped (--keep-overlap): the old token is refused once the overlap ends"
	}

	fmt.Fprintf(w, "\nSteps:\n%s\n%s\n%s\n",
		"1. every control plane: the new token becomes machine.token, the old one a previous token until the overlap ends",
		"2. every worker: the new token becomes machine.token", drop)
}

// printMembers is the plan's table of members.
func (r *staticRotation) printMembers() {
	w := tabwriter.NewWriter(r.e.stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()

	header(w, false, "HOSTNAME\tADDRESS\tROLE\tTOKEN\tSTATE")

	for _, m := range r.members {
		state, tok := "reachable", "-"
		if m.err != nil {
			state = "NOT REACHABLE: " + oneLine(m.err)
		} else {
			tok = m.cfg.TrustdToken().String()
			if m.cfg.TrustdToken().Equal(r.fresh) {
				tok += " (the new token)"
			}
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.name, m.addr, m.role(), tok, state)
	}

	for _, host := range r.unlisted {
		fmt.Fprintf(w, "-\t%s\tcontrolplane\t-\tNOT IN THE MEMBERSHIP LIST (a control-plane endpoint): the rotation refuses to start\n", host)
	}
}

// report prints how a member's step went and adds it to failed if it
// failed.
func (r *staticRotation) report(m *rotationMember, err error, failed []string) []string {
	if err != nil {
		fmt.Fprintf(r.e.stdout, "  %s (%s): FAILED: %s\n", m.name, m.addr, oneLine(err))

		return append(failed, m.name)
	}

	fmt.Fprintf(r.e.stdout, "  %s (%s): done\n", m.name, m.addr)

	return failed
}

func (r *staticRotation) reportStep(n int, start time.Time) {
	fmt.Fprintf(r.e.stdout, "Step %d done in %s.\n", n, r.e.clock.Now().Sub(start).Round(time.Millisecond))
}

// resumeHint says how to go on with this rotation.
func (r *staticRotation) resumeHint() string {
	if r.generated {
		return "run again with --token set to the new token printed when step 1 started"
	}

	return "run again with the same --token"
}

// stoppedBeforeDrop is the error of a rotation stopped before step 3
// because the members failed could not take the new token.
func (r *staticRotation) stoppedBeforeDrop(failed []string) error {
	return fmt.Errorf("stopped before step 3: %s did not take the new token, so the old token stays accepted "+
		"until %s; once they are back, %s to finish",
		strings.Join(failed, ", "), r.expires.Format(time.RFC3339), r.resumeHint())
}

func (r *staticRotation) printBundleNote() {
	w := r.e.stdout
	fmt.Fprintln(w, "\nThe static token is rotated on every member.")

	if r.bundle == nil {
		fmt.Fprintln(w, "NOTE: the secrets bundle's token (trustdinfo.token) and configs generated from it hold the old "+
			"token, which trustd refuses once the overlap is over: set it to the new token (or use --secrets next time) "+
			"before making configs for new nodes.")
	}
}

// oneLine is an error's text on one line, for a table cell.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
