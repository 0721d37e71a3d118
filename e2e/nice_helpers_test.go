package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/machined/etcd"
)

// checkEtcdNice checks the processes of the node whose state is state (on
// the process runtime): every thread of etcd's server runs at etcd.Nice
// below machined's nice value, every thread of apid and trustd at
// machined's.
func checkEtcdNice(t *testing.T, state string) {
	t.Helper()

	own := niceOfTask(t, "/proc/self/stat")
	seen := map[string]bool{}

	for _, pid := range processesUnder(state) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}

		bin := filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0])

		want := own
		switch bin {
		case "etcd":
			want = max(own+etcd.Nice, -20)
		case "apid", "trustd", "machined":
		default:
			continue
		}

		seen[bin] = true

		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
		for _, task := range tasks {
			if got, ok := taskNice(task); ok && got != want {
				t.Errorf("%s (pid %d), thread %s: nice %d, want %d", bin, pid, filepath.Base(filepath.Dir(task)), got, want)
			}
		}
	}

	for _, bin := range []string{"machined", "etcd", "trustd", "apid"} {
		if !seen[bin] {
			t.Errorf("no %s process under %s", bin, state)
		}
	}
}

// niceOfTask is the nice value in a /proc stat file, failing the test
// when it cannot be read.
func niceOfTask(t *testing.T, path string) int {
	t.Helper()

	n, ok := taskNice(path)
	if !ok {
		t.Fatalf("no nice value in %s", path)
	}

	return n
}

// taskNice reads the nice value of a /proc stat file: the 17th field after
// the command's name in parentheses. A task that ended reads as not ok.
func taskNice(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}

	_, rest, _ := strings.Cut(string(data), ") ")

	fields := strings.Fields(rest)
	if len(fields) < 17 {
		return 0, false
	}

	n, err := strconv.Atoi(fields[16])

	return n, err == nil
}
