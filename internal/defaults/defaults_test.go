package defaults_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestClock(t *testing.T) {
	fake := clock.NewFake(testutil.Epoch)
	if got := defaults.Clock(fake); got != fake {
		t.Fatalf("Clock(fake) = %v, want the fake itself", got)
	}

	if d := time.Since(defaults.Clock(nil).Now()); d < 0 || d > time.Minute {
		t.Fatalf("Clock(nil) is %v away from the system clock", d)
	}
}

func TestNow(t *testing.T) {
	fake := clock.NewFake(testutil.Epoch)
	if got := defaults.Now(fake); got != fake {
		t.Fatalf("Now(fake) = %v, want the fake itself", got)
	}

	if d := time.Since(defaults.Now(nil).Now()); d < 0 || d > time.Minute {
		t.Fatalf("Now(nil) is %v away from the system clock", d)
	}
}

func TestRand(t *testing.T) {
	zero := testutil.ZeroRand{}
	if got := defaults.Rand(zero); got != zero {
		t.Fatalf("Rand(zero) = %v, want it kept", got)
	}

	if got := defaults.Rand(nil); got != rand.Reader {
		t.Fatalf("Rand(nil) = %v, want crypto/rand.Reader", got)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer

	l := slog.New(slog.NewTextHandler(&buf, nil))
	if got := defaults.Logger(l); got != l {
		t.Fatal("Logger(l) is not l")
	}

	discard := defaults.Logger(nil)
	if discard == nil || discard.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("Logger(nil) is not a logger that discards")
	}
}

func TestOutput(t *testing.T) {
	var buf bytes.Buffer
	if got := defaults.Output(&buf); got != &buf {
		t.Fatalf("Output(buf) = %v, want it kept", got)
	}

	if got := defaults.Output(nil); got != io.Discard {
		t.Fatalf("Output(nil) = %v, want io.Discard", got)
	}
}
