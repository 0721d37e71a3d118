package connlimit

import "testing"

// TestHandshakeRoomCounts: the room's counts by source and of strangers
// follow connections in and out, a connection dropped twice counts once,
// and strangers stay in the order they came.
func TestHandshakeRoomCounts(t *testing.T) {
	var r handshakeRoom

	a1 := &conn{source: "10.0.0.1", known: true}
	a2 := &conn{source: "10.0.0.1"}
	b := &conn{source: "10.0.0.2"}

	for _, c := range []*conn{a1, a2, b} {
		r.add(c)
	}

	check := func(what string, n, ofA, ofB, strangers int) {
		t.Helper()

		if r.len() != n || r.of("10.0.0.1") != ofA || r.of("10.0.0.2") != ofB || r.strangers.Len() != strangers {
			t.Fatalf("%s: len %d, of a %d, of b %d, strangers %d; want %d, %d, %d, %d",
				what, r.len(), r.of("10.0.0.1"), r.of("10.0.0.2"), r.strangers.Len(), n, ofA, ofB, strangers)
		}
	}

	check("three in", 3, 2, 1, 2)

	if first, _ := r.strangers.Front().Value.(*conn); first != a2 {
		t.Fatalf("the oldest stranger is %+v, want the first that came", first)
	}

	r.drop(a2)
	r.drop(a2)
	check("a stranger out, twice", 2, 1, 1, 1)

	r.drop(a1)
	check("the known one out", 1, 0, 1, 1)

	if len(r.bySource) != 1 {
		t.Fatalf("sources with no handshake left are kept: %v", r.bySource)
	}
}
