package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as a process may choose.
	line := "4242 (odd) name) S 17 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 9 0 123456 1000 200 18446744073709551615"

	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}

	want := procStat{Comm: "odd) name", State: "S", PPID: 17, Start: 123456}
	if st != want {
		t.Fatalf("parseStat = %+v, want %+v", st, want)
	}

	for _, bad := range []string{"", "4242 no name S 1", "1 (x) S 1 2 3"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tapid\nVmPeak:\t 1300000 kB\nVmHWM:\t   30720 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n"

	rss, hwm, err := parseStatus([]byte(status))
	if err != nil || rss != 20<<20 || hwm != 30<<20 {
		t.Fatalf("parseStatus = %d, %d, %v; want 20 MiB, 30 MiB", rss, hwm, err)
	}

	for name, bad := range map[string]string{
		"kernel thread": "Name:\tkthreadd\nThreads:\t1\n",
		"odd unit":      "VmHWM:\t1 MB\nVmRSS:\t1 MB\n",
	} {
		if _, _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestStartedAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	// Started 1000.5 s after boot; the machine has been up 1010.75 s.
	got := startedAt(100050, 1010750*time.Millisecond, now)
	if want := now.Add(-10250 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("startedAt = %v, want %v", got, want)
	}

	if up, err := parseUptime([]byte("1010.75 2000.00\n")); err != nil || up != 1010750*time.Millisecond {
		t.Fatalf("parseUptime = %v, %v", up, err)
	}
}

// TestOwnProcess reads this test's own process, the one /proc entry that
// surely exists: its parent, its start and its memory.
func TestOwnProcess(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil || st.PPID != os.Getppid() {
		t.Fatalf("readStat = %+v, %v; want ppid %d", st, err, os.Getppid())
	}

	start, err := processStart(os.Getpid())
	if err != nil || time.Since(start) < 0 || time.Since(start) > time.Hour {
		t.Fatalf("processStart = %v, %v", start, err)
	}

	if rss, hwm, err := readMemory(os.Getpid()); err != nil || rss == 0 || hwm < rss {
		t.Fatalf("readMemory = %d, %d, %v", rss, hwm, err)
	}
}

func TestParseBootLog(t *testing.T) {
	log := `machined: starting
{"time":"2026-11-22T05:05:41.3198Z","level":"INFO","msg":"boot phase","phase":"config"}
{"time":"2026-11-22T05:05:41.426Z","level":"INFO","msg":"node ready"}
`

	b := parseBootLog([]byte(log))
	if want := time.Date(2026, 11, 22, 5, 5, 41, 426e6, time.UTC); !b.ready.Equal(want) || b.failed != "" {
		t.Fatalf("parseBootLog = %+v, want ready at %v", b, want)
	}

	failed := parseBootLog([]byte(`{"time":"2026-11-22T05:05:41Z","msg":"boot failed","phase":"certificates","error":"no trustd"}`))
	if failed.failed != "phase certificates: no trustd" || !failed.ready.IsZero() {
		t.Fatalf("parseBootLog of a failure = %+v", failed)
	}
}

func TestParseSchedstat(t *testing.T) {
	if d, err := parseSchedstat([]byte("194454841 65594900 663\n")); err != nil || d != 194454841 {
		t.Fatalf("parseSchedstat = %v, %v", d, err)
	}

	if _, err := parseSchedstat([]byte("")); err == nil {
		t.Fatal("empty schedstat accepted")
	}
}
