package runner

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-os/aegis/internal/logtest"
)

// TestProcessNice starts a shell with a nice value and has it print its
// own and that of a child it starts; no thread of the test's own process
// may keep the value afterwards.
func TestProcessNice(t *testing.T) {
	base := ownNice(t)

	for _, tt := range []struct {
		name string
		nice int
	}{
		{"a step ahead", -1},
		{"far ahead", -5},
		{"as far as there is", minNice - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Skip("lowering a nice value needs CAP_SYS_NICE")
			}

			var (
				out    logtest.Sink
				mu     sync.Mutex
				events []string
			)

			r := Process(ProcessConfig{
				Path: "/bin/sh", Args: []string{"-c", `cut -d' ' -f19 /proc/$$/stat; sleep 0.2 & cut -d' ' -f19 /proc/$!/stat; wait`},
				Log: &out, Nice: tt.nice,
			})

			err := r.Run(context.Background(), func(_ bool, msg string) {
				mu.Lock()
				events = append(events, msg)
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}

			want := strconv.Itoa(max(base+tt.nice, minNice))
			if got := strings.Fields(out.String()); len(got) != 2 || got[0] != want || got[1] != want {
				t.Fatalf("the process and its child ran at nice %q, want %s for both", got, want)
			}

			if len(events) != 1 || strings.Contains(events[0], "priority") {
				t.Errorf("start events %q: the nice value was refused", events)
			}

			threadsAt(t, base)
		})
	}
}

// TestProcessNicePositive: a lower priority is refused, as the thread
// that starts the process could not be set back without CAP_SYS_NICE.
func TestProcessNicePositive(t *testing.T) {
	err := Process(ProcessConfig{Path: "/bin/true", Nice: 5}).Run(context.Background(), func(bool, string) {})
	if err == nil || !strings.Contains(err.Error(), "nice 5") {
		t.Fatalf("err = %v, want the nice value refused", err)
	}

	threadsAt(t, ownNice(t))
}

// TestProcessNiceRefused: a process whose nice value the kernel refuses
// (a lower one without CAP_SYS_NICE) runs at machined's, and its start
// says so.
func TestProcessNiceRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may lower a nice value")
	}

	var events []string

	r := Process(ProcessConfig{Path: "/bin/true", Nice: -5})
	if err := r.Run(context.Background(), func(_ bool, msg string) { events = append(events, msg) }); err != nil {
		t.Fatal(err)
	}

	if len(events) != 1 || !strings.Contains(events[0], "at machined's priority") {
		t.Fatalf("start events %q, want one that says the process runs at machined's priority", events)
	}

	threadsAt(t, ownNice(t))
}

// ownNice is the nice value of the test process's main thread.
func ownNice(t *testing.T) int {
	t.Helper()

	return niceOf(t, "/proc/self/stat")
}

// threadsAt fails unless every thread of the test process is at nice.
func threadsAt(t *testing.T, nice int) {
	t.Helper()

	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(stats) == 0 {
		t.Fatalf("threads: %v", err)
	}

	for _, s := range stats {
		if got := niceOf(t, s); got != nice {
			t.Errorf("thread %s kept nice %d, want %d", filepath.Base(filepath.Dir(s)), got, nice)
		}
	}
}

// niceOf reads the nice value from a stat file of /proc: the 19th field,
// the 17th after the command's name in parentheses.
func niceOf(t *testing.T, path string) int {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	_, rest, _ := strings.Cut(string(data), ") ")

	fields := strings.Fields(rest)
	if len(fields) < 17 {
		t.Fatalf("%s: %q", path, data)
	}

	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}

	return n
}

// TestSharesOfNice: a cgroup's weight against the default as the kernel
// weighs a nice value against 0 (its table: 3121 at -5, 9548 at -10,
// 88761 at -20), within a percent.
func TestSharesOfNice(t *testing.T) {
	for _, tt := range []struct {
		nice   int
		kernel uint64
	}{{0, 0}, {3, 0}, {-1, 1277}, {-5, 3121}, {-10, 9548}, {-20, 88761}, {-25, 88761}} {
		got := SharesOfNice(tt.nice)
		if diff := float64(got) - float64(tt.kernel); diff > 0.01*float64(tt.kernel) || diff < -0.01*float64(tt.kernel) {
			t.Errorf("SharesOfNice(%d) = %d, want about %d", tt.nice, got, tt.kernel)
		}
	}
}
