// Package logbuf puts a buffer in front of a daemon's log output for the
// lines that may wait: apid's request log (one line per call) and the
// copies of trustd's audit records in its operational log (one per
// certificate). Those lines are written together, at most Interval after
// the first of them or once MaxBuffered bytes wait, instead of one write
// each; every other line is written at once, after the lines waiting
// before it, so the output keeps the order in which lines were logged.
//
// What a crash may lose: the deferred lines of the last Interval (or up to
// MaxBuffered bytes of them), never a line written through Write, and
// nothing on a clean stop, whose Close writes what waits. That is a loss
// those lines can bear: a request log line tells an operator what was
// called, and a crashing process writes its own cause (the runtime's panic
// report) straight to the output; trustd's audit record itself is in its
// audit file, synced before the certificate leaves (internal/logfile),
// and only its copy for the operational log waits here, as do the copies
// of refusal records, which trustd's refusals file keeps. The daemons'
// other lines (warnings, errors, apid's denials) are written at once.
package logbuf

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Config configures a Writer.
type Config struct {
	// Out receives the lines. Required. Out is written from one goroutine
	// at a time.
	Out io.Writer
	// Interval is how long a deferred line waits at most before it is
	// written. Required: positive.
	Interval time.Duration
	// MaxBuffered is how many bytes of deferred lines are kept before
	// they are written at once, whatever the Interval. Required: positive.
	MaxBuffered int
	// Clock times the Interval. Nil means the system clock.
	Clock clock.Clock
}

// Writer writes lines to Out: through Write at once, through Deferred
// within the Interval. It is safe for concurrent use. Close writes what
// waits and stops the goroutine that times the Interval.
type Writer struct {
	out         io.Writer
	interval    time.Duration
	maxBuffered int
	clock       clock.Clock

	mu     sync.Mutex
	buf    []byte
	closed bool
	// err is Out's last error, returned by the next Write or Close: a
	// deferred line's caller has gone on by the time it is written.
	err error

	pending chan struct{} // a token when the buffer went from empty to not
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the timing goroutine has ended
}

// New returns a Writer and starts the goroutine that writes deferred lines
// on time; Close stops it.
func New(cfg Config) (*Writer, error) {
	if cfg.Out == nil || cfg.Interval <= 0 || cfg.MaxBuffered <= 0 {
		return nil, errors.New("logbuf: Out, a positive Interval and a positive MaxBuffered are required")
	}

	w := &Writer{
		out: cfg.Out, interval: cfg.Interval, maxBuffered: cfg.MaxBuffered, clock: defaults.Clock(cfg.Clock),
		buf:     make([]byte, 0, cfg.MaxBuffered),
		pending: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}

	go w.run()

	return w, nil
}

// Write writes p at once, after the deferred lines waiting before it.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if len(w.buf) > 0 {
		w.buf = append(w.buf, p...)

		return len(p), w.flushLocked()
	}

	_, err := w.out.Write(p)
	if err == nil {
		err, w.err = w.err, nil
	}

	return len(p), err
}

// Deferred is the face of w whose lines may wait for the Interval.
func (w *Writer) Deferred() io.Writer { return deferred{w} }

type deferred struct{ w *Writer }

// Write keeps p to be written with the lines around it; p is copied.
func (d deferred) Write(p []byte) (int, error) {
	w := d.w

	w.mu.Lock()
	defer w.mu.Unlock()

	if w.closed {
		_, err := w.out.Write(p)

		return len(p), err
	}

	wasEmpty := len(w.buf) == 0
	w.buf = append(w.buf, p...)

	switch {
	case len(w.buf) >= w.maxBuffered:
		if err := w.flushLocked(); err != nil {
			return len(p), err
		}
	case wasEmpty:
		select {
		case w.pending <- struct{}{}:
		default:
		}
	}

	return len(p), nil
}

// Flush writes the lines waiting now.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()

	return w.flushLocked()
}

// flushLocked writes the buffer and returns Out's error, or the one kept
// from a flush no caller was waiting on.
func (w *Writer) flushLocked() error {
	if len(w.buf) > 0 {
		_, err := w.out.Write(w.buf)
		w.buf = w.buf[:0]

		if err != nil {
			w.err = err
		}
	}

	err := w.err
	w.err = nil

	return err
}

// Close writes the lines waiting and stops the timing goroutine; later
// deferred lines are written at once. It returns the last error of Out.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()

		return nil
	}

	w.closed = true
	close(w.stop)
	err := w.flushLocked()
	w.mu.Unlock()

	<-w.done

	return err
}

// run writes the deferred lines an Interval after the first of them.
func (w *Writer) run() {
	defer close(w.done)

	for {
		select {
		case <-w.stop:
			return
		case <-w.pending:
		}

		t := w.clock.NewTimer(w.interval)

		select {
		case <-w.stop:
			t.Stop()

			return
		case <-t.C():
		}

		w.mu.Lock()
		// An error is kept for the next Write or Close to return.
		if len(w.buf) > 0 {
			if _, err := w.out.Write(w.buf); err != nil {
				w.err = err
			}

			w.buf = w.buf[:0]
		}
		w.mu.Unlock()
	}
}
