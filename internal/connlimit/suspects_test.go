package connlimit

import (
	"fmt"
	"testing"
	"time"
)

func TestSuspects(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newSuspects(3)

	for i := range 4 {
		s.strike(fmt.Sprintf("127.0.0.%d", i), now.Add(time.Duration(i)*time.Second))
	}

	// Struck again: kept over those struck longer ago.
	s.strike("127.0.0.1", now.Add(4*time.Second))
	s.strike("127.0.0.4", now.Add(5*time.Second))

	for src, want := range map[string]bool{"127.0.0.0": false, "127.0.0.1": true, "127.0.0.2": false, "127.0.0.3": true, "127.0.0.4": true} {
		if got := s.has(src, now.Add(5*time.Second)); got != want {
			t.Errorf("%s a suspect: %v, want %v", src, got, want)
		}
	}

	if len(s.byKey) > 3 || s.struck.Len() > 3 {
		t.Fatalf("%d suspects kept, want at most 3", s.struck.Len())
	}

	// SuspectFor after its last strike, a source is forgotten.
	if s.has("127.0.0.1", now.Add(4*time.Second+SuspectFor)) {
		t.Fatal("a suspect past SuspectFor")
	}

	if _, kept := s.byKey["127.0.0.1"]; kept || s.struck.Len() != 2 {
		t.Fatalf("a source past SuspectFor still kept: %d kept", s.struck.Len())
	}
}
