package talossuite

import (
	"os"
	"slices"
	"testing"
)

func TestParseOutput(t *testing.T) {
	f, err := os.Open("testdata/verbose.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	out, err := ParseOutput(f)
	if err != nil {
		t.Fatal(err)
	}

	want := []TestResult{
		{Test: "api.ApidSuite/TestBigPayload", Outcome: Failed, Detail: "api/apid.go:186: Received unexpected error: rpc error: code = NotFound desc = " +
			"resource MachineConfigs.config.talos.dev(config/v1alpha1@undefined) doesn't exist"},
		{Test: "api.ApidSuite/TestControlPlaneRouting", Outcome: Skipped, Detail: "information about routable endpoints is not available"},
		{Test: "api.VersionSuite/TestExpectedVersionMaster", Outcome: Failed, Detail: `api/version.go:66: Not equal: expected: "v1.11.5" actual : "c6a81d3"`, Seconds: 0.01},
		{Test: "api.VersionSuite/TestSameVersionCluster", Outcome: Passed, Seconds: 1.5},
	}

	if !slices.Equal(out.Tests, want) {
		t.Errorf("tests:\n got %+v\nwant %+v", out.Tests, want)
	}

	if got := out.Suites["api.EtcdSuite"]; got != "test panicked: runtime error: invalid memory address or nil pointer dereference" {
		t.Errorf("EtcdSuite's failure = %q", got)
	}

	if _, ok := out.Suites["api.ApidSuite"]; ok {
		t.Error("a suite whose failure is its tests' has no error of its own")
	}

	if out.Abort != "panic: test timed out after 2m0s" {
		t.Errorf("abort = %q", out.Abort)
	}

	if !slices.Contains(out.Started, "api.MonitoringSuite/TestMonitoringAPIs") {
		t.Errorf("started = %q", out.Started)
	}
}

// TestVerdict: a test without an end line takes its suite's error, else
// the reason the binary stopped.
func TestVerdict(t *testing.T) {
	o := Output{
		Tests:  []TestResult{{Test: "s.A/TestX", Outcome: Passed}},
		Suites: map[string]string{"s.B": "SetupSuite: connection refused"},
		Abort:  "panic: test timed out after 5m0s",
	}

	for _, tc := range []struct {
		test    string
		outcome Outcome
		detail  string
	}{
		{"s.A/TestX", Passed, ""},
		{"s.B/TestY", Failed, "suite: SetupSuite: connection refused"},
		{"s.C/TestZ", Failed, "panic: test timed out after 5m0s"},
	} {
		got := verdict(tc.test, o, nil, 1)
		if got.Outcome != tc.outcome || got.Detail != tc.detail {
			t.Errorf("%s: got %s %q, want %s %q", tc.test, got.Outcome, got.Detail, tc.outcome, tc.detail)
		}
	}
}

func TestReportRowsAndProblems(t *testing.T) {
	r := Report{Tests: []TestResult{
		{Test: "api.A/TestOne", Outcome: Passed},
		{Test: "api.A/TestTwo", Outcome: Failed, Detail: "boom"},
		{Test: "api.B/TestThree", Outcome: Skipped},
		{Test: "api.B/TestFour", Outcome: Listed},
	}, Drift: []string{"api.C/TestFive: not listed"}, Verbs: []VerbResult{
		{Command: "version", Status: VerbOK},
		{Command: "dmesg", Status: VerbRefused},
		{Command: "reboot", Status: VerbFailed, Detail: "Unimplemented"},
	}}

	rows := r.Rows()
	if len(rows) != 2 || rows[0].Passed != 1 || rows[0].Failed != 1 || rows[1].Skipped != 1 || rows[1].Listed != 1 {
		t.Errorf("rows = %+v", rows)
	}

	want := []string{"test api.A/TestTwo: boom", "expectation file: api.C/TestFive: not listed", "talosctl reboot: Unimplemented"}
	if got := r.Problems(); !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}
