package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// us is a Summary whose figures are given in microseconds.
func us(n, median, p99, mean int) Summary {
	d := func(v int) time.Duration { return time.Duration(v) * time.Microsecond }

	return Summary{N: n, Median: d(median), P99: d(p99), Mean: d(mean), Min: d(median / 2), Max: d(p99 * 2)}
}

// cs is a Case of us's figures and CPU times per call in microseconds:
// every process's, then the server's.
func cs(n, median, p99, mean, cpu, server int) Case {
	return Case{Summary: us(n, median, p99, mean), CPU: time.Duration(cpu) * time.Microsecond, ServerCPU: time.Duration(server) * time.Microsecond}
}

// fixture is a run's results with round figures, some goals met, some not.
func fixture() Results {
	return Results{
		Issuance: []Issuance{{
			KeyType: "ed25519", Bound: cs(2000, 125, 300, 125, 125, 0),
			TrustdOne: cs(2000, 200, 800, 250, 400, 250), TrustdNew: cs(1000, 1500, 6000, 2000, 2100, 1000),
			CfsslOne: cs(2000, 500, 1500, 1000, 600, 300), CfsslNew: cs(1000, 2000, 5000, 2500, 2000, 900),
			CfsslDBOne: cs(2000, 1500, 4000, 2000, 700, 400), CfsslDBNew: cs(1000, 3000, 7000, 3500, 2200, 1000),
			Saturated: []Saturated{
				{Server: "trustd", Callers: 8, Calls: 6000, Elapsed: 2 * time.Second, ServerCPU: 230 * time.Microsecond},
				{Server: serverCfssl, Callers: 8, Calls: 3000, Elapsed: 2 * time.Second, ServerCPU: 400 * time.Microsecond},
				{Server: serverCfsslDB, Callers: 8, Calls: 1000, Elapsed: 2 * time.Second, ServerCPU: 500 * time.Microsecond},
				{Server: "trustd", Callers: 32, Calls: 5000, Elapsed: 2 * time.Second, ServerCPU: 160 * time.Microsecond},
				{Server: serverCfssl, Callers: 32, Calls: 4000, Elapsed: 2 * time.Second, ServerCPU: 420 * time.Microsecond},
				{Server: serverCfsslDB, Callers: 32, Calls: 1250, Elapsed: 2 * time.Second, ServerCPU: 520 * time.Microsecond},
			},
		}},
		CPUs: 2,
		Join: &JoinStorm{
			Clients: 200, Totals: []time.Duration{3 * time.Second, 2 * time.Second, 4 * time.Second},
			Latency: us(600, 1_000_000, 2_900_000, 1_100_000), Retries: 2,
		},
		// Each storm's total ÷ floor: 3s ÷ 2s, 2s ÷ 2s, 4s ÷ 4s; the
		// median of the totals over that of the floors would be 1.5×.
		JoinFloor: &JoinStorm{
			Clients: 1000, Totals: []time.Duration{3 * time.Second, 2 * time.Second, 4 * time.Second},
			CPU:     []time.Duration{4 * time.Second, 4 * time.Second, 8 * time.Second},
			Latency: us(3000, 1_500_000, 3_900_000, 1_600_000), Retries: 40,
		},
		APID: &APIDCalls{
			Direct: cs(3000, 200, 700, 250, 180, 90), Proxy: cs(3000, 400, 1200, 450, 400, 150), Via: cs(3000, 500, 1500, 600, 550, 300),
			Workers:        8,
			DirectParallel: Saturated{Server: "direct", Callers: 8, Calls: 16000, Elapsed: time.Second, ServerCPU: 60 * time.Microsecond, CPU: 120 * time.Microsecond},
			ProxyParallel:  Saturated{Server: "through the bare proxy", Callers: 8, Calls: 5000, Elapsed: time.Second, ServerCPU: 100 * time.Microsecond, CPU: 300 * time.Microsecond},
			ViaParallel:    Saturated{Server: "through apid", Callers: 8, Calls: 4600, Elapsed: time.Second, ServerCPU: 180 * time.Microsecond, CPU: 390 * time.Microsecond},
			Handshake:      cs(1000, 1000, 2500, 1250, 1100, 500), ConnRate: 800,
		},
		FanOut: []FanOut{
			{Nodes: 1, Latency: cs(300, 700, 900, 750, 700, 300)},
			{Nodes: 5, Latency: cs(300, 1400, 3000, 1500, 2800, 800)},
			{Nodes: 20, Latency: cs(300, 2800, 9000, 3000, 11000, 0)},
		},
		Boot: &Boot{
			ControlPlane: Summary{N: 5, Median: 120 * time.Millisecond, P99: 150 * time.Millisecond},
			Worker:       Summary{N: 5, Median: 2500 * time.Millisecond, P99: 3 * time.Second},
			ClusterNodes: 20, ClusterUp: 1300 * time.Millisecond,
		},
		Memory: []Memory{
			{Process: "apid", Role: RoleControlPlane, IdleRSS: 23 << 20, IdleHWM: 24 << 20, LoadHWM: 30 << 20},
			{Process: "trustd", Role: "stand-alone, issuance ed25519", IdleRSS: 19 << 20, IdleHWM: 19 << 20, LoadHWM: 22 << 20},
			{Process: "containerd", Role: "control plane, containerd runtime", IdleRSS: 40 << 20, IdleHWM: 41 << 20, LoadHWM: 42 << 20},
			{Process: "containerd-shim (apid)", Role: "control plane, containerd runtime", IdleRSS: 12 << 20, IdleHWM: 12 << 20, LoadHWM: 13 << 20},
		},
		Flood: floodFixture(),
		Etcd: &Etcd{
			ControlPlanes: 3, Workers: 2, ClusterUp: 9 * time.Second, SingleUp: 2500 * time.Millisecond,
			IdleRSS: []uint64{40 << 20, 38 << 20, 39 << 20}, Keys: 10000, SnapshotBytes: 3 << 20,
			Snapshot: 150 * time.Millisecond, Restore: 1200 * time.Millisecond,
		},
		TokenStores: &TokenStores{
			ControlPlanes: 3, Bbolt: cs(1000, 1000, 2000, 1000, 400, 0), Etcd: cs(1000, 1200, 3000, 1250, 500, 0),
			Concurrent: []Saturated{
				{Server: "bbolt store", Callers: 8, Calls: 1000, Elapsed: 800 * time.Millisecond, ServerCPU: 450 * time.Microsecond},
				{Server: "etcd store", Callers: 8, Calls: 1000, Elapsed: 900 * time.Millisecond, ServerCPU: 520 * time.Microsecond},
			},
			Storm: &JoinStorm{Clients: 200, Totals: []time.Duration{4 * time.Second}, Retries: 5,
				Latency: Summary{N: 200, Median: 2 * time.Second, P99: 4 * time.Second}},
		},
		Runtimes: []RuntimeFigures{
			{
				Runtime: "process", Fresh: us(5, 130_000, 160_000, 140_000), Restart: us(5, 120_000, 150_000, 125_000),
				Nodes: 5, Direct: cs(3000, 200, 700, 250, 180, 90), Via: cs(3000, 500, 1500, 600, 550, 300),
				FanOut: []FanOut{{Nodes: 1, Latency: cs(300, 700, 900, 750, 700, 300)}, {Nodes: 5, Latency: cs(300, 1400, 3000, 1500, 2800, 800)}},
			},
			{
				Runtime: "containerd", Fresh: us(5, 2_400_000, 3_000_000, 2_500_000), Restart: us(5, 900_000, 1_100_000, 950_000),
				Nodes: 5, Direct: cs(3000, 210, 700, 260, 190, 95), Via: cs(3000, 550, 1600, 650, 600, 320),
				FanOut: []FanOut{{Nodes: 1, Latency: cs(300, 770, 1000, 800, 750, 320)}, {Nodes: 5, Latency: cs(300, 1610, 3300, 1700, 3000, 850)}},
			},
		},
	}
}

func fixtureReport() *Report {
	m := Machine{CPU: "Test CPU", CPUs: 2, MemoryMiB: 4096, OS: "Debian", Kernel: "6.1", Go: "go1.26", LoadBefore: "0.50", LoadAfter: "1.50"}
	r := NewReport("quick", time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC), m, fixture())
	r.Revision, r.Elapsed = "abc1234", 75*time.Second
	r.Failures = []string{"cluster loads: example failure"}

	return r
}

func TestReportOutputs(t *testing.T) {
	for _, tt := range []struct {
		file  string
		write func(*Report, *bytes.Buffer) error
	}{
		{"report.txt", func(r *Report, b *bytes.Buffer) error { return r.WriteTable(b) }},
		{"report.json", func(r *Report, b *bytes.Buffer) error { return r.WriteJSON(b) }},
		{"report.md", func(r *Report, b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
	} {
		t.Run(tt.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(fixtureReport(), &b); err != nil {
				t.Fatal(err)
			}

			golden.Compare(t, tt.file, b.Bytes())
		})
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := fixtureReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}

	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}

	if back.Results.APID.Via != fixture().APID.Via || len(back.Sections) != 10 || len(back.Goals) != 18 {
		t.Fatalf("round trip lost figures: %+v", back)
	}
}

func TestGoals(t *testing.T) {
	met := map[string]bool{}
	for _, g := range fixture().Goals() {
		met[g.Name] = g.Met
	}

	want := map[string]bool{
		"ed25519: trustd ÷ cfssl serve with certificate database, one connection (rate)":  true,  // 4000/s ÷ 500/s
		"ed25519: trustd ÷ cfssl serve with certificate database, 8 callers (rate)":       true,  // 3000/s ÷ 500/s
		"ed25519: trustd ÷ cfssl serve with certificate database, 32 callers (rate)":      false, // 2500/s ÷ 625/s
		"ed25519: trustd ÷ cfssl serve without a database, 32 callers (rate)":             true,  // 2500/s ÷ 2000/s
		"ed25519: trustd server CPU per certificate ÷ in-process bound, 32 callers":       true,  // 160µs ÷ 125µs
		"apid ÷ transparent proxy floor, one caller (median latency)":                     false, // 500µs ÷ 400µs
		"apid ÷ transparent proxy floor, 8 callers (rate)":                                true,  // 4600/s ÷ 5000/s
		"limited-use token, 8 callers: etcd store ÷ bbolt store (rate)":                   true,  // 1111/s ÷ 1250/s
		"one control plane: machined start to etcd healthy":                               false, // 2.5s
		"cluster create, 3 control planes + 2 workers, until all etcd voters are healthy": false, // 9s
		"join storm of 1000: total ÷ CPU floor":                                           true,  // median of 1.5×, 1.0×, 1.0×
		"fan-out to 5 nodes: median ÷ CPU floor":                                          true,  // 1.4ms ÷ (2.8ms / 2)
		"fan-out to 20 nodes: median ÷ CPU floor":                                         true,  // 2.8ms ÷ (11ms / 2)
	}

	for name, w := range want {
		if got, ok := met[name]; !ok || got != w {
			t.Errorf("%s: met = %v (listed: %v), want %v", name, got, ok, w)
		}
	}

	for _, g := range (Results{}).Goals() {
		if g.Met || g.Measured != missing {
			t.Errorf("goal %q met without a figure: %+v", g.Name, g)
		}
	}
}

// TestJoinFloorRatio: a storm's ratio is its own total over its own CPU
// ÷ the cores, the median over storms; no figure without the CPU of every
// storm or the count of cores.
func TestJoinFloorRatio(t *testing.T) {
	s := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, ms := range v {
			out[i] = time.Duration(ms) * time.Millisecond
		}

		return out
	}

	for _, tt := range []struct {
		name        string
		totals, cpu []time.Duration
		cpus        int
		want        float64
	}{
		{"one storm", s(1300), s(2000), 2, 1.3},
		{"median of three", s(3000, 2000, 4000), s(4000, 4000, 8000), 2, 1.0},
		{"four cores", s(1000), s(2000), 4, 2.0},
		{"CPU not measured", s(1000), nil, 2, 0},
		{"CPU of some storms only", s(1000, 1000), s(2000), 2, 0},
		{"cores unknown", s(1000), s(2000), 0, 0},
	} {
		j := &JoinStorm{Clients: 1000, Totals: tt.totals, CPU: tt.cpu}
		if got := j.FloorRatio(tt.cpus); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: FloorRatio = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReplaceResults(t *testing.T) {
	doc := "# Title\n\nkept\n\n" + BeginResults + "\nold figures\n" + EndResults + "\n\nalso kept\n"

	got, err := ReplaceResults([]byte(doc), []byte("\nnew figures\n"))
	if err != nil {
		t.Fatal(err)
	}

	want := "# Title\n\nkept\n\n" + BeginResults + "\n\nnew figures\n\n" + EndResults + "\n\nalso kept\n"
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}

	for _, bad := range []string{"no markers", EndResults + BeginResults} {
		if _, err := ReplaceResults([]byte(bad), nil); err == nil {
			t.Errorf("ReplaceResults(%q) accepted", bad)
		}
	}
}

func TestCompactDropsEmptyColumns(t *testing.T) {
	g := grid{{"a", "b", "c"}, {"1", "", "3"}, {"", "", "x"}}

	got := g.compact()
	if len(got[0]) != 2 || got[0][1] != "c" || strings.Join(got[1], ",") != "1,3" {
		t.Fatalf("compact = %v", got)
	}
}
