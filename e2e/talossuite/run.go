package talossuite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Nodes are the cluster's nodes by role, as addresses.
type Nodes struct {
	ControlPlanes, Workers []string
}

// Env is the value of NodesEnv for the nodes.
func (n Nodes) Env() string {
	return "controlplane=" + strings.Join(n.ControlPlanes, ",") + ";worker=" + strings.Join(n.Workers, ",")
}

// SuiteOptions configure RunSuite.
type SuiteOptions struct {
	// Binary is Talos's integration test binary (Build). Required.
	Binary string
	// Talosconfig is the client config with an admin context. Required.
	Talosconfig string
	// Nodes are given to the suite through NodesEnv. Required.
	Nodes Nodes
	// Version and GoVersion are what the nodes' Version answer should
	// carry (the Aegis build's tag and Go), for VersionSuite.
	Version, GoVersion string
	// Talosctl is the talosctl binary the suite may call.
	Talosctl string
	// Expect says which tests to run. Required.
	Expect Expectations
	// LogDir receives each test's whole output, as SUITE/TEST.log.
	// Required.
	LogDir string
	// Timeout bounds one test; zero is TestTimeout.
	Timeout time.Duration
	// Progress receives a line per test. Nil discards.
	Progress io.Writer
}

// RunSuite runs every served test of the expectation file, one process
// each, in file order, and returns a result for every test of the file:
// the skip list's as Listed.
func RunSuite(ctx context.Context, opts SuiteOptions) []TestResult {
	out := make([]TestResult, 0, len(opts.Expect))

	for _, e := range opts.Expect {
		if e.Status == Skip {
			out = append(out, TestResult{Test: e.Test, Outcome: Listed, Detail: e.Reason})

			continue
		}

		if ctx.Err() != nil {
			out = append(out, TestResult{Test: e.Test, Outcome: Failed, Detail: "not run: " + ctx.Err().Error()})

			continue
		}

		r := opts.runOne(ctx, e.Test)
		progress(opts.Progress, "%-4s %s (%.1fs) %s", strings.ToUpper(string(r.Outcome)), r.Test, r.Seconds, r.Detail)
		out = append(out, r)
	}

	return out
}

// runOne runs one test in a process of its own and reads its verdict from
// the output (kept in LogDir).
func (opts SuiteOptions) runOne(ctx context.Context, test string) TestResult {
	suite, method, _ := strings.Cut(test, "/")
	timeout := opts.Timeout

	if timeout <= 0 {
		timeout = TestTimeout
	}

	// The binary's own -test.timeout ends it with a stack dump; the
	// context is the backstop for a process that ignores it.
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()

	args := []string{
		"-test.v", "-test.count=1", "-test.timeout=" + timeout.String(),
		"-test.run=^" + topTest + "$/^" + regexp.QuoteMeta(suite) + "$/^" + regexp.QuoteMeta(method) + "$",
		"-talos.config=" + opts.Talosconfig,
		"-talos.version=" + opts.Version, "-talos.go.version=" + opts.GoVersion,
	}
	if opts.Talosctl != "" {
		args = append(args, "-talos.talosctlpath="+opts.Talosctl)
	}

	var buf bytes.Buffer

	cmd := exec.CommandContext(ctx, opts.Binary, args...)
	cmd.Env = append(os.Environ(), NodesEnv+"="+opts.Nodes.Env())
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second

	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start).Seconds()

	logPath := filepath.Join(opts.LogDir, suite, method+".log")
	if err := writeLog(logPath, buf.Bytes()); err != nil {
		progress(opts.Progress, "talossuite: %v", err)
	}

	parsed, err := ParseOutput(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return TestResult{Test: test, Outcome: Failed, Detail: "reading its output: " + err.Error(), Seconds: elapsed}
	}

	return verdict(test, parsed, runErr, elapsed)
}

// verdict picks the test's result out of its process's output: its own
// end line, else its suite's failure (SetupSuite), else the reason the
// binary stopped.
func verdict(test string, o Output, runErr error, elapsed float64) TestResult {
	for _, r := range o.Tests {
		if r.Test == test {
			return r
		}
	}

	r := TestResult{Test: test, Outcome: Failed, Seconds: elapsed}
	suite, _, _ := strings.Cut(test, "/")

	switch {
	case o.Suites[suite] != "":
		r.Detail = "suite: " + o.Suites[suite]
	case o.Abort != "":
		r.Detail = o.Abort
	case runErr != nil:
		r.Detail = "no result: " + runErr.Error()
	default:
		r.Detail = "no result: the test did not run (is it in this Talos version?)"
	}

	return r
}

func writeLog(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}

	return os.WriteFile(path, data, 0o644) //nolint:gosec // test output, no secrets
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
