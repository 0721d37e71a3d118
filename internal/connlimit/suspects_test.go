package connlimit

import (
	"fmt"
	"testing"
	"time"
)

func TestSuspects(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	at := func(s time.Duration) time.Time { return now.Add(s * time.Second) }
	s := newSuspects(3)

	for i := range 4 {
		s.strike(fmt.Sprintf("127.0.0.%d", i), at(time.Duration(i)))
	}

	// Struck again: a suspect, and kept over those struck longer ago.
	s.strike("127.0.0.1", at(4))
	s.strike("127.0.0.4", at(5))
	s.strike("127.0.0.4", at(5))

	for src, want := range map[string]bool{
		"127.0.0.0": false, // forgotten: the table is full
		"127.0.0.1": true,  // twice
		"127.0.0.2": false, // forgotten
		"127.0.0.3": false, // once
		"127.0.0.4": true,
	} {
		if got := s.has(src, at(5)); got != want {
			t.Errorf("%s a suspect: %v, want %v", src, got, want)
		}
	}

	if len(s.byKey) > 3 || s.struck.Len() > 3 {
		t.Fatalf("%d suspects kept, want at most 3", s.struck.Len())
	}

	// A call clears a suspect.
	s.clear("127.0.0.4")

	if s.has("127.0.0.4", at(5)) {
		t.Fatal("a suspect that made a call")
	}

	// SuspectFor after its last strike, a source is forgotten; a strike
	// after that counts as its first.
	if s.has("127.0.0.1", at(4).Add(SuspectFor)) {
		t.Fatal("a suspect past SuspectFor")
	}

	s.strike("127.0.0.3", at(3).Add(SuspectFor))

	if s.has("127.0.0.3", at(3).Add(SuspectFor)) {
		t.Fatal("a strike SuspectFor after the one before made a suspect")
	}
}
