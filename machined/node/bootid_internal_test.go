package node

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/aegis-os/aegis/internal/logtest"
)

// TestBootIDRenews: each boot has a boot ID of its own; without randomness
// the one before is kept, and the log says so.
func TestBootIDRenews(t *testing.T) {
	var (
		b    bootID
		sink logtest.Sink
	)

	if b.current() != "" {
		t.Fatalf("boot ID before the first boot: %q", b.current())
	}

	b.renew(rand.Reader, sink.Logger())
	first := b.current()

	b.renew(rand.Reader, sink.Logger())
	second := b.current()

	if first == "" || second == "" || first == second {
		t.Fatalf("boot IDs of two boots: %q, %q", first, second)
	}

	b.renew(bytes.NewReader(nil), sink.Logger())

	if b.current() != second {
		t.Fatalf("boot ID without randomness: %q, want %q kept", b.current(), second)
	}

	sink.First(t, "boot ID kept from the boot before")
}
