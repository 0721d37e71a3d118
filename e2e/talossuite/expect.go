package talossuite

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Status is what Aegis promises for one of Talos's tests.
type Status string

// The two statuses of the expectation file.
const (
	// Serve: the test's subject is something Aegis serves; it must pass.
	Serve Status = "serve"
	// Skip: the test's subject is outside Aegis (Kubernetes, disks, the
	// kernel, ...); it is not run.
	Skip Status = "skip"
)

// Expectation is one line of the expectation file.
type Expectation struct {
	// Test is "Suite/TestMethod", e.g. "api.VersionSuite/TestSameVersionCluster".
	Test   string
	Status Status
	// Reason says why a test is skipped (required) or what a served test
	// covers (optional).
	Reason string
	// Line is the line number in the file, for error messages.
	Line int
}

// Suite returns the suite part of the test's name.
func (e Expectation) Suite() string {
	suite, _, _ := strings.Cut(e.Test, "/")

	return suite
}

// Expectations is the parsed expectation file, in file order.
type Expectations []Expectation

// ParseExpectations reads the expectation file: one test a line,
// "Suite/TestMethod STATUS REASON...", blank lines and lines starting with
// '#' ignored. A skipped test must have a reason; a test may appear once.
func ParseExpectations(r io.Reader, name string) (Expectations, error) {
	var (
		out  Expectations
		seen = map[string]int{}
		sc   = bufio.NewScanner(r)
		n    int
	)

	for sc.Scan() {
		n++

		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}

		e, err := parseExpectation(line, n)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}

		if prev, ok := seen[e.Test]; ok {
			return nil, fmt.Errorf("%s:%d: %s is listed already on line %d", name, n, e.Test, prev)
		}

		seen[e.Test] = n
		out = append(out, e)
	}

	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	return out, nil
}

func parseExpectation(line string, n int) (Expectation, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return Expectation{}, fmt.Errorf("want \"Suite/TestName serve|skip reason\", got %q", line)
	}

	e := Expectation{Test: fields[0], Status: Status(fields[1]), Reason: strings.Join(fields[2:], " "), Line: n}

	suite, test, ok := strings.Cut(e.Test, "/")
	switch {
	case !ok || suite == "" || !strings.HasPrefix(test, "Test") || strings.Contains(test, "/"):
		return e, fmt.Errorf("%q is not Suite/TestName", e.Test)
	case e.Status != Serve && e.Status != Skip:
		return e, fmt.Errorf("%s: status %q is not serve or skip", e.Test, e.Status)
	case e.Status == Skip && e.Reason == "":
		return e, fmt.Errorf("%s: a skipped test needs a reason", e.Test)
	}

	return e, nil
}

// Lookup returns the expectation of a test.
func (es Expectations) Lookup(test string) (Expectation, bool) {
	i := slices.IndexFunc(es, func(e Expectation) bool { return e.Test == test })
	if i < 0 {
		return Expectation{}, false
	}

	return es[i], true
}

// Served returns the tests to run, grouped by suite in file order.
func (es Expectations) Served() []Expectation {
	var out []Expectation

	for _, e := range es {
		if e.Status == Serve {
			out = append(out, e)
		}
	}

	return out
}

// Drift compares the file with the tests Talos's source defines: a test
// of the source the file does not list, and a line naming a test the
// source does not have, are both drift. The result is sorted.
func (es Expectations) Drift(source []string) []string {
	var out []string

	for _, t := range source {
		if _, ok := es.Lookup(t); !ok {
			out = append(out, fmt.Sprintf("%s: a test of Talos's suite the expectation file does not list", t))
		}
	}

	for _, e := range es {
		if !slices.Contains(source, e.Test) {
			out = append(out, fmt.Sprintf("%s (line %d): listed, but Talos's suite has no such test", e.Test, e.Line))
		}
	}

	slices.Sort(out)

	return out
}
