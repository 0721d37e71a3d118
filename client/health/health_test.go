package health

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
)

func TestServiceProblems(t *testing.T) {
	running := func(id string, health *machine.ServiceHealth) *machine.ServiceInfo {
		return &machine.ServiceInfo{Id: id, State: "Running", Health: health}
	}

	tests := []struct {
		name         string
		services     []*machine.ServiceInfo
		controlPlane bool
		want         string
	}{
		{name: "all up", services: []*machine.ServiceInfo{running("apid", &machine.ServiceHealth{Healthy: true})}},
		{name: "no health check", services: []*machine.ServiceInfo{running("apid", nil)}},
		{
			name:     "starting and unhealthy",
			services: []*machine.ServiceInfo{{Id: "apid", State: "Starting"}, running("trustd", &machine.ServiceHealth{LastMessage: "NOT_SERVING"})},
			want:     "apid is Starting; trustd is unhealthy: NOT_SERVING",
		},
		{name: "health not known yet", services: []*machine.ServiceInfo{running("apid", &machine.ServiceHealth{Unknown: true})}, want: "apid has not passed its health check yet"},
		{name: "nothing loaded", want: "no services yet"},
		{
			name: "control plane without trustd", controlPlane: true,
			services: []*machine.ServiceInfo{running("apid", nil)},
			want:     "trustd is not running (is it a control plane?)",
		},
		{name: "control plane", controlPlane: true, services: []*machine.ServiceInfo{running("apid", nil), running("trustd", nil)}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ServiceProblems(tt.services, tt.controlPlane); got != tt.want {
				t.Fatalf("ServiceProblems = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestClusterHealthRound: the progress of a cluster check becomes the
// per-subject verdicts of -o json|yaml, the last message of each subject
// winning.
func TestClusterHealthRound(t *testing.T) {
	r := Round{}
	for _, msg := range []string{
		"member list: ok (3 nodes)",
		"node w-1 (10.0.0.5): apid not answering: no reply within 5s",
		"etcd: member cp-2: not answering at https://10.0.0.2:2379: refused",
		"node w-1 (10.0.0.5): ok (2 services up)",
		"cluster healthy: 4 checks passed",
	} {
		r.Note(msg)
	}

	want := Round{"member list": "", "node w-1 (10.0.0.5)": "", "etcd": "member cp-2: not answering at https://10.0.0.2:2379: refused"}
	if len(r) != len(want) {
		t.Fatalf("round %v, want %v", r, want)
	}

	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s: %q, want %q", k, r[k], v)
		}
	}
}

func TestRoundVerdict(t *testing.T) {
	tests := []struct {
		name     string
		round    Round
		healthy  bool
		problems string
	}{
		{name: "empty", healthy: true},
		{name: "all healthy", round: Round{"10.0.0.2": "", "10.0.0.3": ""}, healthy: true},
		{
			name:     "sorted problems",
			round:    Round{"10.0.0.3": "no reply", "10.0.0.1": "", "10.0.0.2": "apid is Starting"},
			problems: "10.0.0.2: apid is Starting; 10.0.0.3: no reply",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.round.Healthy(); got != tt.healthy {
				t.Errorf("Healthy = %v, want %v", got, tt.healthy)
			}

			if got := tt.round.Problems(); got != tt.problems {
				t.Errorf("Problems = %q, want %q", got, tt.problems)
			}
		})
	}
}

func TestOptionsLabels(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{name: "nodes named", opts: Options{Endpoints: []string{"127.5.0.2"}, Nodes: []string{"127.5.0.2", "127.5.0.3"}}, want: []string{"127.5.0.2", "127.5.0.3"}},
		{name: "endpoint's own", opts: Options{Endpoints: []string{"127.5.0.2", "127.5.0.3"}}, want: []string{"endpoint 127.5.0.2,127.5.0.3"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.opts.labels(); !slices.Equal(got, tt.want) {
				t.Fatalf("labels = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReportChanges: progress names each node whose state changed since
// the last round, sorted, with the time elapsed, and nothing else.
func TestReportChanges(t *testing.T) {
	var lines []string

	opts := Options{Progress: func(elapsed time.Duration, line string) {
		lines = append(lines, fmt.Sprintf("[%.1fs] %s", elapsed.Seconds(), line))
	}}.withDefaults()
	shown := map[string]string{}

	reportChanges(opts, Round{"b": "no reply", "a": "no reply"}, shown, 0)
	reportChanges(opts, Round{"b": "no reply", "a": ""}, shown, time.Second)
	reportChanges(opts, Round{"b": "", "a": ""}, shown, 2*time.Second)

	want := []string{
		"[0.0s] a: waiting: no reply", "[0.0s] b: waiting: no reply",
		"[1.0s] a: healthy",
		"[2.0s] b: healthy",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("progress:\n%v\nwant\n%v", lines, want)
	}
}
