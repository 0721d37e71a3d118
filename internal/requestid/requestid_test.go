package requestid_test

import (
	"crypto/rand"
	"errors"
	"testing"
	"testing/iotest"

	"github.com/aegis-os/aegis/internal/requestid"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		r    func() string
		ok   func(string) bool
	}{
		{"random", func() string { return requestid.New(rand.Reader) }, func(id string) bool { return len(id) == 2*requestid.Size }},
		{"failing reader", func() string { return requestid.New(iotest.ErrReader(errors.New("no entropy"))) }, func(id string) bool { return id == requestid.None }},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id := tt.r(); !tt.ok(id) {
				t.Fatalf("id %q", id)
			}
		})
	}
}
