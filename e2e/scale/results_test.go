package scale

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var update = flag.Bool("update", false, "rewrite testdata/results.json")

func TestPercentiles(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}

	p50, p99, p100 := Percentiles(s)
	if p50 != 50*time.Millisecond || p99 != 99*time.Millisecond || p100 != 100*time.Millisecond {
		t.Fatalf("percentiles of 1..100 ms: %s %s %s, want 50ms 99ms 100ms", p50, p99, p100)
	}

	if a, b, c := Percentiles(nil); a != 0 || b != 0 || c != 0 {
		t.Fatalf("percentiles of nothing: %s %s %s, want zeros", a, b, c)
	}

	if a, b, c := Percentiles([]time.Duration{7}); a != 7 || b != 7 || c != 7 {
		t.Fatalf("percentiles of one sample: %s %s %s, want it thrice", a, b, c)
	}
}

// sample are figures of the shape a run gives, chosen so that some goals
// are met and some missed.
func sample() Results {
	return Results{
		Workers: 2000, ControlPlanes: 3, Joined: 2000, Served: 1900,
		Storm: Storm{Total: 20 * time.Second, CPU: 14 * time.Second, HarnessCPU: 6 * time.Second, Cores: 2, Floor: 10 * time.Second},
		Steady: Steady{
			Window: time.Minute, IdleCPU: 0.01, CPU: map[string]float64{"cp1/trustd": 0.04, "cp1/etcd": 0.02, "cp2/trustd": 0.001},
			CallsPerSec: 2200, WritesPerSec: ptr(200.0), DBSize: ptr(int64(8 << 20)),
			TrustdConns: map[string]int{"cp1": 900, "cp2": 4}, TrustdRSS: map[string]uint64{"cp1": 100 << 20, "cp2": 40 << 20},
			Renewals: 2000, Causes: []Cause{{Cause: "Unavailable: connection error", PerSec: 12.5}},
			TrustdClosed: map[string]float64{"evicted": 3.5, "refused": 1},
		},
		Revocation: Revocation{Call: 20 * time.Millisecond, First: 300 * time.Millisecond, P50: 500 * time.Millisecond, P99: 990 * time.Millisecond, P100: 3 * time.Second, Reached: 2000},
		CLI:        CLI{Members: 250 * time.Millisecond, MembersListed: 2003, Health: 2 * time.Second},
		Failover:   Failover{Restart: 20 * time.Second, Served: 12 * time.Second, Waited: 4 * time.Second, FailedCalls: 300},
	}
}

func TestGoals(t *testing.T) {
	met := map[string]bool{}
	for _, g := range sample().Goals() {
		met[g.Name] = g.Met
	}

	want := map[string]bool{
		"hollow workers served by 3 control planes":                          false, // 2000 of 10000
		"steady CPU of the control planes per 1,000 workers (less idle)":     false, // (6.1 % − 1 %) ÷ 2
		"revocation reaching 99 %":                                           true,
		"revocation reaching 100 %":                                          false,
		"join storm: total ÷ CPU floor":                                      false, // 2×
		"aegisctl get members":                                               true,
		"control plane killed: every worker served again (the longest wait)": true, // 4 s, served 12 s after the kill
		"trustd RSS (largest)":                                               true,
	}

	for name, w := range want {
		if got, ok := met[name]; !ok || got != w {
			t.Errorf("goal %q: met %v (listed %v), want %v", name, got, ok, w)
		}
	}

	// Under 2 % per 1,000 because most workers went unserved: missed.
	starved := sample()
	starved.Steady.CPU = map[string]float64{"cp1/trustd": 0.02}

	for _, g := range starved.Goals() {
		if g.Name == "steady CPU of the control planes per 1,000 workers (less idle)" && (g.Met || !strings.Contains(g.Value, "1900 of 2000 served")) {
			t.Errorf("goal %q with 100 of 2,000 workers unserved: met %v, value %q", g.Name, g.Met, g.Value)
		}
	}

	starved.Served = starved.Joined

	for _, g := range starved.Goals() {
		if g.Name == "steady CPU of the control planes per 1,000 workers (less idle)" && !g.Met {
			t.Errorf("goal %q with every worker served at %s: missed", g.Name, g.Value)
		}
	}

	empty := Results{}.Goals()
	for _, g := range empty {
		if g.Met {
			t.Errorf("goal %q met with no figures: a run that measured nothing must miss every goal", g.Name)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteTable(&b); err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{"2000 of 2000 joined", "2200 trustd calls/s", "cp1/trustd", "900 connections, RSS 100 MiB", "failed 12.5 /s ", "Unavailable: connection error", "evicted 3.5 /s, refused 1.0 /s", "missed", "met"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteJSONGolden(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join("testdata", "results.json")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("results.json differs from %s (go test -update rewrites it):\n%s", path, b.String())
	}
}

// TestCPUFloor: a storm's floor is every process's CPU time over the cores.
func TestCPUFloor(t *testing.T) {
	if got := CPUFloor(14*time.Second, 6*time.Second, 2); got != 10*time.Second {
		t.Errorf("CPUFloor(14s, 6s, 2 cores) = %s, want 10s", got)
	}

	if got := CPUFloor(time.Second, time.Second, 0); got != 0 {
		t.Errorf("CPUFloor without cores = %s, want 0", got)
	}
}

// TestCauses: failures that differ only in addresses, ports and figures
// count as one cause; the top causes are those that grew most in the
// window, the most frequent first.
// TestWriteTableWithoutEtcdStatus: figures etcd's status did not give
// say so, instead of a figure taken from nothing.
func TestWriteTableWithoutEtcdStatus(t *testing.T) {
	r := sample()
	r.Steady.WritesPerSec, r.Steady.DBSize = nil, nil

	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(b.String(), "etcd writes not read, etcd db not read") {
		t.Fatalf("table does not say etcd's figures were not read:\n%s", b.String())
	}
}

func ptr[T any](v T) *T { return &v }

func TestCauses(t *testing.T) {
	var c causes

	c.add(status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.11.0.2:50001: i/o timeout"`))
	before := c.snapshot()

	for _, addr := range []string{"127.11.0.2:50001", "127.11.0.3:50001", "[fd00::1]:50001"} {
		c.add(status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp "+addr+": i/o timeout\""))
	}

	c.add(errors.New("context deadline exceeded after 10s"))
	c.add(status.Error(codes.Unavailable, "127.11.0.2:50001: connection error\n127.11.0.3:50001:  i/o timeout"))

	got := topCauses(before, c.snapshot(), 2, 5)
	want := []Cause{
		{Cause: `Unavailable: connection error: desc = "transport: Error while dialing: dial tcp N: i/o timeout"`, PerSec: 1.5},
		{Cause: "Unavailable: N: connection error N: i/o timeout", PerSec: 0.5},
		{Cause: "Unknown: context deadline exceeded after Ns", PerSec: 0.5},
	}

	if !slices.Equal(got, want) {
		t.Fatalf("topCauses = %+v, want %+v", got, want)
	}
}
