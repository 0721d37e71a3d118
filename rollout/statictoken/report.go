package statictoken

import (
	"fmt"
	"strings"
	"time"
)

// report prints how a member's step went and adds it to failed if it
// failed.
func (r *Rotation) report(m *Node, err error, failed []string) []string {
	if err != nil {
		r.w.Printf("  %s (%s): FAILED: %s\n", m.Name, m.Addr, OneLine(err))

		return append(failed, m.Name)
	}

	r.w.Printf("  %s (%s): done\n", m.Name, m.Addr)

	return failed
}

func (r *Rotation) reportStep(n int, start time.Time) {
	r.w.Printf("Step %d done in %s.\n", n, r.w.Clock().Now().Sub(start).Round(time.Millisecond))
}

// resumeHint says how to go on with this rotation.
func (r *Rotation) resumeHint() string {
	if r.opts.Generated {
		return "run again with --token set to the new token printed when step 1 started"
	}

	return "run again with the same --token"
}

// stoppedBeforeDrop is the error of a rotation stopped before step 3
// because the members failed could not take the new token.
func (r *Rotation) stoppedBeforeDrop(failed []string) error {
	return fmt.Errorf("stopped before step 3: %s did not take the new token, so the old token stays accepted "+
		"until %s; once they are back, %s to finish",
		strings.Join(failed, ", "), r.opts.Expires.Format(time.RFC3339), r.resumeHint())
}

// OneLine is an error's text on one line, for a line of progress or a
// table cell.
func OneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
