package timesync_test

import (
	"slices"
	"testing"
	"time"
)

// waitAsked waits until server has been queried.
func (h *harness) waitAsked(server string) {
	h.t.Helper()

	deadline := time.Now().Add(time.Minute)
	for !slices.Contains(h.ntp.asked(), server) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s never asked; asked %v", server, h.ntp.asked())
		}

		time.Sleep(time.Millisecond)
	}
}

func TestReconfigure(t *testing.T) {
	h := start(t, []string{"ntp-a"},
		valid(10*time.Millisecond, time.Millisecond), // ntp-a opens the gate
		valid(10*time.Millisecond, time.Millisecond), // ntp-b, asked at once
		valid(10*time.Millisecond, time.Millisecond), // ntp-c after the trusted host clock
	)

	if !h.svc.Synced() {
		t.Fatal("gate closed after a valid reply")
	}

	// New servers: asked at once, without waiting for the poll interval.
	if err := h.svc.Reconfigure([]string{"ntp-b"}, false, 0, 0); err != nil {
		t.Fatal(err)
	}

	h.waitAsked("ntp-b")

	// A trusted host clock opens the gate and asks nobody.
	if err := h.svc.Reconfigure(nil, true, 0, 0); err != nil {
		t.Fatal(err)
	}

	if !h.svc.Synced() {
		t.Fatal("gate closed with a trusted host clock")
	}

	// Leaving it closes the gate until a server answers: fail closed.
	if err := h.svc.Reconfigure([]string{"ntp-c"}, false, time.Second, 0); err != nil {
		t.Fatal(err)
	}

	h.waitAsked("ntp-c")

	for deadline := time.Now().Add(time.Minute); !h.svc.Synced(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gate not reopened by ntp-c")
		}
	}

	for _, bad := range []struct {
		servers []string
		trust   bool
	}{{nil, false}, {[]string{"x"}, true}} {
		if err := h.svc.Reconfigure(bad.servers, bad.trust, 0, 0); err == nil {
			t.Errorf("Reconfigure(%v, %v) accepted", bad.servers, bad.trust)
		}
	}
}

// TestReconfiguredPollInterval: a new poll interval paces the rounds that
// follow the one Reconfigure starts; zero goes back to the default.
func TestReconfiguredPollInterval(t *testing.T) {
	h := start(t, []string{"ntp-a"}, valid(0, time.Millisecond), valid(0, time.Millisecond),
		valid(0, time.Millisecond), valid(0, time.Millisecond))

	if err := h.svc.Reconfigure([]string{"ntp-a"}, false, 0, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	h.waitAsked("ntp-a")

	for deadline := time.Now().Add(time.Minute); len(h.ntp.asked()) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Reconfigure started no round")
		}
	}

	h.waitRound()
	h.clk.Advance(5*time.Second - time.Nanosecond)

	if n := len(h.ntp.asked()); n != 2 {
		t.Fatalf("queried %d times before the new interval passed, want 2", n)
	}

	h.next(time.Nanosecond)

	if n := len(h.ntp.asked()); n != 3 {
		t.Fatalf("queried %d times after the new interval, want 3", n)
	}

	if err := h.svc.Reconfigure([]string{"ntp-a"}, false, 0, -time.Second); err == nil {
		t.Error("a negative poll interval accepted")
	}
}
