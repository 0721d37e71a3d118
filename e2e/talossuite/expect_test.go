package talossuite

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func readTestExpectations(t *testing.T) Expectations {
	t.Helper()

	f, err := os.Open("testdata/expect.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	es, err := ParseExpectations(f, "expect.txt")
	if err != nil {
		t.Fatal(err)
	}

	return es
}

func TestParseExpectations(t *testing.T) {
	es := readTestExpectations(t)

	want := Expectations{
		{Test: "api.ApidSuite/TestBigPayload", Status: Serve, Reason: "apid carries a big config", Line: 3},
		{Test: "api.ApidSuite/TestControlPlaneRouting", Status: Serve, Line: 4},
		{Test: "api.KernelSuite/TestCmdline", Status: Skip, Reason: "kernel: the Talos kernel command line", Line: 5},
	}
	if !slices.Equal(es, want) {
		t.Errorf("got %+v\nwant %+v", es, want)
	}

	if served := es.Served(); len(served) != 2 || served[0].Suite() != "api.ApidSuite" {
		t.Errorf("served = %+v", served)
	}
}

func TestParseExpectationsRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"one field":      {"api.A/TestX\n", "want"},
		"bad status":     {"api.A/TestX maybe\n", `status "maybe"`},
		"skip no reason": {"api.A/TestX skip\n", "needs a reason"},
		"no suite":       {"TestX serve\n", "is not Suite/TestName"},
		"not a test":     {"api.A/Helper serve\n", "is not Suite/TestName"},
		"twice":          {"api.A/TestX serve\napi.A/TestX skip why\n", "listed already on line 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseExpectations(strings.NewReader(tc.text), "f")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDrift: the golden source tree defines three tests; the file lists
// two of them and one test the source does not have.
func TestDrift(t *testing.T) {
	source, err := SourceTests("testdata/src")
	if err != nil {
		t.Fatal(err)
	}

	wantSource := []string{"api.KernelSuite/TestCmdline", "api.VersionSuite/TestExpectedVersionMaster", "api.VersionSuite/TestSameVersionCluster"}
	if !slices.Equal(source, wantSource) {
		t.Fatalf("source tests = %q, want %q", source, wantSource)
	}

	drift := readTestExpectations(t).Drift(source)
	want := []string{
		"api.ApidSuite/TestBigPayload (line 3): listed, but Talos's suite has no such test",
		"api.ApidSuite/TestControlPlaneRouting (line 4): listed, but Talos's suite has no such test",
		"api.VersionSuite/TestExpectedVersionMaster: a test of Talos's suite the expectation file does not list",
		"api.VersionSuite/TestSameVersionCluster: a test of Talos's suite the expectation file does not list",
	}

	if !slices.Equal(drift, want) {
		t.Errorf("drift:\n got %q\nwant %q", drift, want)
	}
}

// TestCheckedInExpectations: the checked-in file parses, and each skip
// has its reason (the drift against Talos's source is checked by the
// run, which has the source).
func TestCheckedInExpectations(t *testing.T) {
	f, err := os.Open("expect.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	es, err := ParseExpectations(f, "expect.txt")
	if err != nil {
		t.Fatal(err)
	}

	if len(es.Served()) == 0 || len(es.Served()) == len(es) {
		t.Errorf("%d served of %d: the file should serve some tests and skip others", len(es.Served()), len(es))
	}
}
