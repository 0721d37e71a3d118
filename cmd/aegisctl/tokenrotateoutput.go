package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aegis-os/aegis/rollout/statictoken"
)

// printStaticPlan shows what the rotation will do: the new token (its id
// only), the end of the overlap, the members and the steps.
func printStaticPlan(w io.Writer, opts *statictoken.Options, r *statictoken.Rotation) {
	how := "given with --token"

	if opts.Generated {
		how = "generated, shown when step 1 starts"
	}

	fmt.Fprintf(w, "New static token: %s (%s)\n", opts.Token, how)
	fmt.Fprintf(w, "Overlap: the old token stays accepted until %s\n\nMembers:\n", opts.Expires.Format(time.RFC3339))
	printStaticMembers(w, opts, r)

	drop := "3. every control plane: drop the old token; it is refused from then on"
	if opts.KeepOverlap {
		drop = "3. skipped (--keep-overlap): the old token is refused once the overlap ends"
	}

	fmt.Fprintf(w, "\nSteps:\n%s\n%s\n%s\n",
		"1. every control plane: the new token becomes machine.token, the old one a previous token until the overlap ends",
		"2. every worker: the new token becomes machine.token", drop)
}

// printStaticMembers is the plan's table of members.
func printStaticMembers(out io.Writer, opts *statictoken.Options, r *statictoken.Rotation) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()

	header(w, false, "HOSTNAME\tADDRESS\tROLE\tTOKEN\tSTATE")

	for _, m := range r.Members() {
		state, tok := "reachable", "-"
		if m.Err != nil {
			state = "NOT REACHABLE: " + statictoken.OneLine(m.Err)
		} else {
			tok = m.Config.TrustdToken().String()
			if m.Config.TrustdToken().Equal(opts.Token) {
				tok += " (the new token)"
			}
		}

		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Addr, m.NodeRole(), tok, state)
	}

	for _, host := range r.Unlisted() {
		fmt.Fprintf(w, "-\t%s\tcontrolplane\t-\tNOT IN THE MEMBERSHIP LIST (a control-plane endpoint): the rotation refuses to start\n", host)
	}
}

func printBundleNote(w io.Writer, opts *statictoken.Options) {
	fmt.Fprintln(w, "\nThe static token is rotated on every member.")

	if opts.Bundle == nil {
		fmt.Fprintln(w, "NOTE: the secrets bundle's token (trustdinfo.token) and configs generated from it hold the old "+
			"token, which trustd refuses once the overlap is over: set it to the new token (or use --secrets next time) "+
			"before making configs for new nodes.")
	}
}
