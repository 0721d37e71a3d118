package backoff

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
)

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func TestNextDoublesUpToMax(t *testing.T) {
	b := &Backoff{Min: time.Second, Max: 8 * time.Second, Rand: testutil.ZeroRand{}}

	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := b.Next(); got != w {
			t.Fatalf("delay %d = %s, want %s", i, got, w)
		}
	}

	b.Reset()

	if got := b.Next(); got != 500*time.Millisecond {
		t.Fatalf("after Reset: %s", got)
	}
}

func TestNextStaysInBounds(t *testing.T) {
	b := &Backoff{Min: time.Second, Max: 10 * time.Second}
	step := time.Second

	for range 20 {
		d := b.Next()
		if d < step/2 || d > step {
			t.Fatalf("delay %s outside [%s, %s]", d, step/2, step)
		}

		step = min(2*step, 10*time.Second)
	}
}

func TestMaxBelowMin(t *testing.T) {
	b := &Backoff{Min: 4 * time.Second, Max: time.Second, Rand: testutil.ZeroRand{}}

	for range 3 {
		if got := b.Next(); got != 2*time.Second {
			t.Fatalf("delay = %s, want 2s", got)
		}
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		name string
		r    func() *bytes.Reader
		span time.Duration
		want time.Duration
	}{
		{name: "zero span", span: 0, want: 0},
		{name: "fixed bytes", r: func() *bytes.Reader { return bytes.NewReader([]byte{0, 0, 0, 0, 0, 0, 0, 7}) }, span: 5, want: 2},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got time.Duration
			if tt.r == nil {
				got = Jitter(testutil.ZeroRand{}, tt.span)
			} else {
				got = Jitter(tt.r(), tt.span)
			}

			if got != tt.want {
				t.Fatalf("Jitter = %d, want %d", got, tt.want)
			}
		})
	}

	if got := Jitter(failing{}, time.Second); got != 0 {
		t.Fatalf("failing source: %s, want 0", got)
	}
}
