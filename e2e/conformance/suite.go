// Package conformance is Aegis's conformance suite: cases that a live
// cluster must answer exactly as specified, above all the refusals. Each
// case checks the exact gRPC code (or the TLS refusal) and that nothing
// happened: no certificate issued beyond what the case expects (trustd's
// audit records), no service touched (ServiceList and the event stream of
// the nodes involved unchanged).
//
// The suite runs against a local cluster (machined/localcluster) whose
// folder it is given: it reads the admin client config and the secrets
// bundle (the OS CA key mints the odd certificates the cases present), and
// adds a test-only control plane of its own for the cases that need a node
// whose time source and accepted CAs it controls. cmd/aegis-conformance is
// the command; `make conformance` creates a cluster, runs the suite and
// destroys the cluster.
package conformance

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// Case is one conformance case.
type Case struct {
	// Group is the component under test: "apid" or "trustd".
	Group string
	// Name says what the case presents.
	Name string
	// Expected is the outcome the case must observe, in the vocabulary of
	// Run's return value: a gRPC code name, "TLS refused", or a code with
	// what the reply must show.
	Expected string
	// Nodes are the nodes whose state must not change; nil means the
	// target control plane and the worker.
	Nodes []string
	// Issues is how many certificates the case expects trustd to issue.
	Issues int
	// Setup prepares what the case needs before the first observation (a
	// reboot, a skewed clock). Its failure fails the case. Nil means none.
	Setup func(ctx context.Context, e *Env) error
	// Run performs the case and returns what it observed; it reports
	// broken invariants of its own through r.
	Run func(ctx context.Context, e *Env, r *Report) string
}

// Report collects the problems of one case beyond its outcome.
type Report struct {
	problems []string
}

// Problemf records a broken invariant.
func (r *Report) Problemf(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// Result is the verdict of one case.
type Result struct {
	Case     *Case
	Got      string
	Problems []string
	Duration time.Duration
}

// Passed reports whether the case observed its expected outcome and broke
// no invariant.
func (r Result) Passed() bool { return r.Got == r.Case.Expected && len(r.Problems) == 0 }

// CaseTimeout bounds one case, set-up of its own included (the time-gate
// case waits for the time service's next poll). Generous: the machine may
// be busy.
const CaseTimeout = 5 * time.Minute

// runCase runs c between two observations of the nodes it must leave alone.
func (e *Env) runCase(ctx context.Context, c *Case) Result {
	ctx, cancel := context.WithTimeout(ctx, CaseTimeout)
	defer cancel()

	start := time.Now()
	nodes := e.placeholders(c.Nodes)
	if nodes == nil {
		nodes = []string{e.Target, e.Worker}
	}

	r := &Report{}

	if c.Setup != nil {
		if err := c.Setup(ctx, e); err != nil {
			return Result{Case: c, Got: "not run", Problems: []string{"set-up: " + err.Error()}, Duration: time.Since(start)}
		}
	}

	before, err := e.observe(ctx, nodes)
	if err != nil {
		return Result{Case: c, Got: "not run", Problems: []string{"observing the nodes before the case: " + err.Error()}}
	}

	got := c.Run(ctx, e, r)

	after, err := e.observe(ctx, nodes)
	if err != nil {
		r.Problemf("observing the nodes after the case: %v", err)
	} else {
		compare(before, after, c.Issues, r)
	}

	return Result{Case: c, Got: got, Problems: r.problems, Duration: time.Since(start)}
}

// Filter keeps the cases whose "group/name" matches re; nil keeps all.
func Filter(cases []*Case, re *regexp.Regexp) []*Case {
	if re == nil {
		return cases
	}

	var out []*Case

	for _, c := range cases {
		if re.MatchString(c.Group + "/" + c.Name) {
			out = append(out, c)
		}
	}

	return out
}

// Print writes the results as a table (case, expected, got), then the
// problems of every failing case, then the summary line "N passed, N
// failed" alone on the last line. It returns the number of failures.
func Print(w io.Writer, results []Result) int {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCASE\tEXPECTED\tGOT\tRESULT")

	var failures []Result

	for _, res := range results {
		verdict := "pass"
		if !res.Passed() {
			verdict = "FAIL"
			failures = append(failures, res)
		}

		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", res.Case.Group, res.Case.Name, res.Case.Expected, res.Got, verdict)
	}

	tw.Flush() //nolint:errcheck // report output

	for _, res := range failures {
		fmt.Fprintf(w, "\nFAIL %s/%s: expected %s, got %s\n", res.Case.Group, res.Case.Name, res.Case.Expected, res.Got)

		for _, p := range res.Problems {
			fmt.Fprintf(w, "  ! %s\n", oneLine(p))
		}
	}

	fmt.Fprintf(w, "\n%d passed, %d failed\n", len(results)-len(failures), len(failures))

	return len(failures)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}

	return s
}
