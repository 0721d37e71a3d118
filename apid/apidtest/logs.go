package apidtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// LogSink collects JSON log records so tests can check them.
type LogSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write stores log output.
func (s *LogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.buf.Write(p)
}

// Logger returns a JSON logger writing to the sink at debug level.
func (s *LogSink) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Records returns every record so far.
func (s *LogSink) Records(tb testing.TB) []map[string]any {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()

	var out []map[string]any

	for line := range strings.Lines(s.buf.String()) {
		rec := map[string]any{}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			tb.Fatalf("bad log line %q: %v", line, err)
		}

		out = append(out, rec)
	}

	return out
}

// Find returns the records with message msg whose fields hold the given
// values (field, value, field, value...).
func (s *LogSink) Find(tb testing.TB, msg string, fields ...any) []map[string]any {
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
