package conformance

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"google.golang.org/grpc/codes"
)

func TestNTPServerAnswersAndSkews(t *testing.T) {
	s, err := startNTP("127.8.9.1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	tests := []struct {
		name string
		skew time.Duration
	}{
		{"in time", 0},
		{"an hour ahead", time.Hour},
		{"a day behind", -24 * time.Hour},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Skew(tt.skew)

			resp, err := ntp.QueryWithOptions(s.Addr(), ntp.QueryOptions{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}

			if err = resp.Validate(); err != nil {
				t.Fatalf("reply not fit for synchronization: %v", err)
			}

			if off := resp.ClockOffset - tt.skew; off > time.Second || off < -time.Second {
				t.Fatalf("offset %s, want about %s", resp.ClockOffset, tt.skew)
			}
		})
	}
}

func TestSourcesAreDistinctAndInRange(t *testing.T) {
	pfx := netip.MustParsePrefix("127.8.128.0/17")

	s, err := newSources(pfx)
	if err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}

	for range sourcesPerRun - 1 {
		a, err := s.take()
		if err != nil {
			t.Fatal(err)
		}

		if seen[a] || !pfx.Contains(netip.MustParseAddr(a)) {
			t.Fatalf("source %s repeated or outside %s", a, pfx)
		}

		seen[a] = true
	}

	for _, bad := range []string{"10.0.0.0/8", "127.8.0.0/24", "::1/128"} {
		if _, err := newSources(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("range %s accepted", bad)
		}
	}
}

func TestPrintEndsWithTheSummary(t *testing.T) {
	ok := &Case{Group: "apid", Name: "passes", Expected: "PermissionDenied"}
	bad := &Case{Group: "trustd", Name: "fails", Expected: "InvalidArgument"}

	var out bytes.Buffer

	failed := Print(&out, []Result{
		{Case: ok, Got: "PermissionDenied"},
		{Case: bad, Got: "InvalidArgument", Problems: []string{"1 certificate(s) issued, want 0"}},
	})

	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")

	switch {
	case failed != 1:
		t.Fatalf("failed = %d, want 1", failed)
	case lines[len(lines)-1] != "1 passed, 1 failed":
		t.Fatalf("last line %q", lines[len(lines)-1])
	case !strings.Contains(out.String(), "! 1 certificate(s) issued"):
		t.Fatalf("problem not shown:\n%s", out.String())
	}
}

func TestDescribeCounts(t *testing.T) {
	got := describeCounts(map[codes.Code]int{codes.Unauthenticated: 99, codes.OK: 1})
	if got != "OK ×1, Unauthenticated ×99" {
		t.Fatalf("describeCounts = %q", got)
	}
}
