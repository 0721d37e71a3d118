// Package logtest collects what a logger or a process writes, safely for
// concurrent writers, so that tests can read it while it is written.
package logtest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-os/aegis/internal/daemonflag"
)

// Sink collects output: JSON log records (Logger, Records, Find) or any
// text (String).
type Sink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // closed by the next Write; nil until a Wait asks
}

// Write stores log output.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.wrote != nil {
		close(s.wrote)
		s.wrote = nil
	}

	return s.buf.Write(p)
}

// Wait blocks until done holds, looking again after each write, and
// returns ctx's error if it ends first.
func (s *Sink) Wait(ctx context.Context, done func() bool) error {
	for {
		s.mu.Lock()
		if s.wrote == nil {
			s.wrote = make(chan struct{})
		}
		wrote := s.wrote
		s.mu.Unlock()

		if done() {
			return nil
		}

		select {
		case <-wrote:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// String returns everything written so far.
func (s *Sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.buf.String()
}

// Logger returns a JSON logger writing to the sink at debug level, with
// durations written as the daemons write them.
func (s *Sink) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: daemonflag.DurationsAsText}))
}

// Records returns every record so far; a line that is not a JSON record
// fails the test.
func (s *Sink) Records(tb testing.TB) []map[string]any {
	tb.Helper()

	return s.decode(func(line string, err error) { tb.Fatalf("bad log line %q: %v", line, err) })
}

// JSONRecords returns the lines so far that are JSON records and skips the
// rest: a process's output may hold other lines, such as a crash report.
func (s *Sink) JSONRecords() []map[string]any {
	return s.decode(func(string, error) {})
}

// decode parses every line as a JSON record, handing the ones that are not
// to bad.
func (s *Sink) decode(bad func(line string, err error)) []map[string]any {
	var out []map[string]any

	for line := range strings.Lines(s.String()) {
		rec := map[string]any{}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			bad(line, err)

			continue
		}

		out = append(out, rec)
	}

	return out
}

// Find returns the records with message msg whose fields hold the given
// values (field, value, field, value...).
func (s *Sink) Find(tb testing.TB, msg string, fields ...any) []map[string]any {
	tb.Helper()

	var out []map[string]any

	for _, r := range s.Records(tb) {
		if r["msg"] != msg {
			continue
		}

		match := true

		for i := 0; i+1 < len(fields); i += 2 {
			if r[fields[i].(string)] != fields[i+1] {
				match = false
			}
		}

		if match {
			out = append(out, r)
		}
	}

	return out
}

// First returns the first record Find would return, or nil.
func (s *Sink) First(tb testing.TB, msg string, fields ...any) map[string]any {
	tb.Helper()

	if recs := s.Find(tb, msg, fields...); len(recs) > 0 {
		return recs[0]
	}

	return nil
}
