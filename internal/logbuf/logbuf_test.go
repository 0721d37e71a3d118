package logbuf_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logbuf"
)

// out records each write to it, as one string per write.
type out struct {
	mu     sync.Mutex
	writes []string
	err    error
	// wrote, when not nil, gets a token at each write.
	wrote chan struct{}
}

func (o *out) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()

	if o.err != nil {
		return 0, o.err
	}

	o.writes = append(o.writes, string(p))

	if o.wrote != nil {
		o.wrote <- struct{}{}
	}

	return len(p), nil
}

func (o *out) all() (string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()

	return strings.Join(o.writes, ""), len(o.writes)
}

func newWriter(t *testing.T, o *out, clk clock.Clock, maxBuffered int) *logbuf.Writer {
	t.Helper()

	w, err := logbuf.New(logbuf.Config{Out: o, Interval: time.Second, MaxBuffered: maxBuffered, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = w.Close() })

	return w
}

func write(t *testing.T, w interface{ Write([]byte) (int, error) }, line string) {
	t.Helper()

	if _, err := w.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
}

// TestDeferredWaitsForInterval: deferred lines are written together, once,
// an Interval after the first of them, and not before.
func TestDeferredWaitsForInterval(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	o := &out{wrote: make(chan struct{}, 1)}
	w := newWriter(t, o, clk, 1<<10)

	write(t, w.Deferred(), "a\n")
	write(t, w.Deferred(), "b\n")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	clk.Advance(999 * time.Millisecond)

	if got, _ := o.all(); got != "" {
		t.Fatalf("written before the interval: %q", got)
	}

	clk.Advance(time.Millisecond)

	// The timer has fired; its flush runs on the Writer's goroutine.
	select {
	case <-o.wrote:
	case <-ctx.Done():
		t.Fatal("nothing written after the interval")
	}

	if got, n := o.all(); got != "a\nb\n" || n != 1 {
		t.Fatalf("after the interval: %q in %d writes, want \"a\\nb\\n\" in one", got, n)
	}
}

// TestWriteKeepsOrder: a line written at once goes out after the deferred
// lines logged before it, in the same write.
func TestWriteKeepsOrder(t *testing.T) {
	o := &out{}
	w := newWriter(t, o, clock.NewFake(time.Unix(0, 0)), 1<<10)

	write(t, w.Deferred(), "request 1\n")
	write(t, w, "warning\n")
	write(t, w, "error\n")

	if got, n := o.all(); got != "request 1\nwarning\nerror\n" || n != 2 {
		t.Fatalf("got %q in %d writes, want the request line first, then the warning, then the error alone", got, n)
	}
}

// TestMaxBuffered: once MaxBuffered bytes wait, they are written without
// waiting for the interval.
func TestMaxBuffered(t *testing.T) {
	o := &out{}
	w := newWriter(t, o, clock.NewFake(time.Unix(0, 0)), 8)

	write(t, w.Deferred(), "1234\n")

	if got, _ := o.all(); got != "" {
		t.Fatalf("written below MaxBuffered: %q", got)
	}

	write(t, w.Deferred(), "5678\n")

	if got, n := o.all(); got != "1234\n5678\n" || n != 1 {
		t.Fatalf("got %q in %d writes, want both lines in one", got, n)
	}
}

// TestCloseLosesNothing: a clean stop writes every deferred line, and
// lines deferred after Close are written at once.
func TestCloseLosesNothing(t *testing.T) {
	o := &out{}
	w := newWriter(t, o, clock.NewFake(time.Unix(0, 0)), 1<<20)

	var want strings.Builder

	var wg sync.WaitGroup

	for g := range 4 {
		wg.Add(1)

		go func() {
			defer wg.Done()

			for i := range 100 {
				_, _ = fmt.Fprintf(w.Deferred(), "g%d line %d\n", g, i)
			}
		}()
	}

	wg.Wait()

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	got, _ := o.all()
	for g := range 4 {
		for i := range 100 {
			line := fmt.Sprintf("g%d line %d\n", g, i)
			want.WriteString(line)

			if !strings.Contains(got, line) {
				t.Fatalf("lost on Close: %q", line)
			}
		}
	}

	if len(got) != want.Len() {
		t.Fatalf("wrote %d bytes, want %d", len(got), want.Len())
	}

	write(t, w.Deferred(), "late\n")

	if got, _ := o.all(); !strings.HasSuffix(got, "late\n") {
		t.Fatal("a line deferred after Close was not written at once")
	}
}

// TestOutError: a failed flush on the interval is reported by the next
// Write; a failed direct write at once.
func TestOutError(t *testing.T) {
	o := &out{err: errors.New("disk full")}
	w := newWriter(t, o, clock.NewFake(time.Unix(0, 0)), 1<<10)

	if _, err := w.Write([]byte("x\n")); err == nil {
		t.Fatal("a direct write's error was not returned")
	}

	write(t, w.Deferred(), "y\n")

	if err := w.Flush(); err == nil {
		t.Fatal("a flush's error was not returned")
	}
}

func TestNewChecksConfig(t *testing.T) {
	for name, cfg := range map[string]logbuf.Config{
		"no out":          {Interval: time.Second, MaxBuffered: 1},
		"no interval":     {Out: &out{}, MaxBuffered: 1},
		"no max buffered": {Out: &out{}, Interval: time.Second},
	} {
		if _, err := logbuf.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
