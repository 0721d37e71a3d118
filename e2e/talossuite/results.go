package talossuite

import (
	"bufio"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Outcome is how one test ended.
type Outcome string

// Outcomes of a test.
const (
	Passed  Outcome = "pass"
	Failed  Outcome = "fail"
	Skipped Outcome = "skip"
	// Listed: on the skip list of the expectation file, so not run.
	Listed Outcome = "listed"
)

// TestResult is one of Talos's tests as the run saw it.
type TestResult struct {
	// Test is "Suite/TestMethod".
	Test    string  `json:"test"`
	Outcome Outcome `json:"outcome"`
	// Detail is the first error line of a failure, the reason of a skip.
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Suite returns the suite part of the test's name.
func (r TestResult) Suite() string {
	suite, _, _ := strings.Cut(r.Test, "/")

	return suite
}

// Output is what ParseOutput read from `go test -test.v` output.
type Output struct {
	// Tests are the tests at the suite-method level that ended, in order.
	Tests []TestResult
	// Started are the tests of that level that started, ended or not.
	Started []string
	// Suites maps a suite that failed on its own (SetupSuite, a panic in
	// testify's runner) to its first error line.
	Suites map[string]string
	// Abort is the first "panic:" line: the binary stopped there (a panic
	// or its own -test.timeout), and a started test without an end is its
	// victim.
	Abort string
}

// The top-level test of Talos's integration binary.
const topTest = "TestIntegration"

var (
	endLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)`)
	runLine = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	logLine = regexp.MustCompile(`^\s*[A-Za-z0-9_.-]+\.go:\d+: ?(.*)$`)
)

// ParseOutput reads the verbose output of Talos's integration binary.
func ParseOutput(r io.Reader) (Output, error) {
	out := Output{Suites: map[string]string{}}
	lines := map[string][]string{}

	var cur string

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)

	for sc.Scan() {
		line := sc.Text()

		if m := runLine.FindStringSubmatch(line); m != nil {
			cur = m[2]
			if m[1] == "RUN" && depth(cur) == 3 {
				out.Started = append(out.Started, trimTop(cur))
			}

			continue
		}

		if m := endLine.FindStringSubmatch(line); m != nil {
			out.end(m[1], m[2], m[3], lines[m[2]])
			cur = ""

			continue
		}

		if strings.HasPrefix(line, "panic:") && out.Abort == "" {
			out.Abort = clip(line)
		}

		if cur != "" {
			lines[cur] = append(lines[cur], line)
		}
	}

	return out, sc.Err()
}

// end records the end of a test of the suite or the suite-method level.
func (o *Output) end(verdict, name, secs string, lines []string) {
	switch depth(name) {
	case 2:
		if verdict == "FAIL" {
			if e := firstError(lines); e != "" {
				o.Suites[trimTop(name)] = e
			}
		}
	case 3:
		r := TestResult{Test: trimTop(name), Seconds: parseSeconds(secs)}

		switch verdict {
		case "PASS":
			r.Outcome = Passed
		case "SKIP":
			r.Outcome, r.Detail = Skipped, firstLog(lines)
		default:
			r.Outcome, r.Detail = Failed, firstError(lines)
		}

		o.Tests = append(o.Tests, r)
	}
}

func depth(name string) int {
	if !strings.HasPrefix(name, topTest+"/") {
		return 0
	}

	return strings.Count(name, "/") + 1
}

func trimTop(name string) string { return strings.TrimPrefix(name, topTest+"/") }

// firstError returns the first error a test reported: testify's "Error:"
// field with its continuation, else a panic, else the first log line.
func firstError(lines []string) string {
	for i, l := range lines {
		t := strings.TrimSpace(l)

		if rest, ok := strings.CutPrefix(t, "Error:"); ok {
			msg := strings.TrimSpace(rest)

			// testify puts the error on the next line or two ("Received
			// unexpected error:", "Not equal:" with expected and actual).
			for j := i + 1; j < len(lines) && j <= i+2; j++ {
				next := strings.TrimSpace(lines[j])
				if next == "" || isTestifyField(next) {
					break
				}

				msg = strings.TrimSpace(msg + " " + next)
			}

			return clip(traceAt(lines[:i]) + msg)
		}
	}

	for _, l := range lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "panic:") || strings.Contains(t, "[recovered]") {
			return clip(t)
		}
	}

	return firstLog(lines)
}

// traceAt returns "dir/file.go:N: " of the last testify "Error Trace:"
// before an error: where in Talos's code the check failed.
func traceAt(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "Error Trace:"); ok {
			p := strings.TrimSpace(rest)

			return path.Base(path.Dir(p)) + "/" + path.Base(p) + ": "
		}
	}

	return ""
}

// isTestifyField tells a testify report's field line ("Test:", "Messages:").
func isTestifyField(s string) bool {
	name, _, ok := strings.Cut(s, ":")

	return ok && !strings.Contains(name, " ") && len(name) < 12 && name != "" && name[0] >= 'A' && name[0] <= 'Z' ||
		strings.HasPrefix(s, "Error Trace:")
}

// firstLog returns the first non-empty logged line of a test.
func firstLog(lines []string) string {
	for _, l := range lines {
		if m := logLine.FindStringSubmatch(l); m != nil && strings.TrimSpace(m[1]) != "" {
			return clip(strings.TrimSpace(m[1]))
		}
	}

	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" {
			return clip(t)
		}
	}

	return ""
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > MaxErrorLine {
		return s[:MaxErrorLine-3] + "..."
	}

	return s
}

func parseSeconds(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64) //nolint:errcheck // the pattern matched digits and a dot

	return v
}
