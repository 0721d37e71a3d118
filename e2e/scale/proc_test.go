package scale

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 50.
	stat := "4242 (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 0 0"

	d, err := parseCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}

	if d != 3*time.Second {
		t.Fatalf("CPU of 300 ticks: %s, want 3s", d)
	}

	if _, err := parseCPU([]byte("4242 no name")); err == nil {
		t.Fatal("a stat without a command name was read")
	}
}

func TestParseRSS(t *testing.T) {
	v, err := parseRSS([]byte("Name:\ttrustd\nVmHWM:\t  9000 kB\nVmRSS:\t  2048 kB\n"))
	if err != nil || v != 2048<<10 {
		t.Fatalf("VmRSS 2048 kB: %d, %v; want %d", v, err, 2048<<10)
	}

	if _, err := parseRSS([]byte("Name:\tx\n")); err == nil {
		t.Fatal("a status without VmRSS was read")
	}
}

// TestOwnProcess reads the test's own process: it runs against nothing
// but /proc, so it is safe under -short.
func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	if rssOf(pid) == 0 {
		t.Error("own RSS read as zero")
	}

	if commOf(pid) == "" {
		t.Error("own command name read as empty")
	}

	if cpuOf(-1) != 0 || rssOf(-1) != 0 || socketsOf(-1) != 0 {
		t.Error("a process that does not exist has figures")
	}
}

// TestRunRefusesTooFewSources: a fleet larger than its source range is
// refused before any cluster is made.
func TestRunRefusesTooFewSources(t *testing.T) {
	_, err := Run(t.Context(), Config{Workers: 300, Sources: netip.MustParsePrefix("127.64.0.0/24"), BinDir: t.TempDir(), Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "more than the addresses of 127.64.0.0/24") {
		t.Fatalf("300 workers on a /24: %v, want the range named", err)
	}
}
