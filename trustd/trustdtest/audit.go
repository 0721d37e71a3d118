package trustdtest

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/aegis-os/aegis/trustd"
)

// Record is one captured log record with its attributes flattened into a
// map (groups are ignored; trustd's records have none).
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

// String returns the attribute key as a string, or "".
func (r Record) String(key string) string {
	s, _ := r.Attrs[key].(string)

	return s
}

// Int returns the attribute key as an int, or 0.
func (r Record) Int(key string) int {
	switch v := r.Attrs[key].(type) {
	case int64:
		return int(v)
	case int:
		return v
	case float64:
		return int(v)
	}

	return 0
}

// Decisions counts the certificate decisions records account for: issued
// records, refusals written in full, and the refusals a summary counts.
type Decisions struct {
	Issued int
	// Refused counts every refusal, in full or summarized.
	Refused int
	// Full counts the refusals written in full.
	Full int
	// Summaries counts the summary lines.
	Summaries int
}

// Count adds up the decisions of recs, keeping those whose source passes
// keep (all if keep is nil). A summary names a source as counted (an IPv6
// /64, or "other").
func Count(recs []Record, keep func(source string) bool) Decisions {
	var d Decisions

	for _, r := range recs {
		if keep != nil && !keep(r.String(trustd.AuditSource)) {
			continue
		}

		switch {
		case r.Message == trustd.MsgRefusals:
			d.Summaries++
			d.Refused += r.Int(trustd.AuditCount)
		case r.String(trustd.AuditDecision) == trustd.DecisionIssued:
			d.Issued++
		case r.String(trustd.AuditDecision) == trustd.DecisionRefused:
			d.Full++
			d.Refused++
		}
	}

	return d
}

// Recorder is a slog handler that keeps every record for a test to assert
// on. It is safe for concurrent use.
type Recorder struct {
	store *recorderStore
	attrs []slog.Attr
}

type recorderStore struct {
	mu      sync.Mutex
	records []Record
	added   chan struct{} // closed and replaced on every record
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{store: &recorderStore{added: make(chan struct{})}}
}

// Logger returns a logger writing into the recorder.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Records returns the records so far.
func (r *Recorder) Records() []Record {
	r.store.mu.Lock()
	defer r.store.mu.Unlock()

	return slices.Clone(r.store.records)
}

// WaitFor blocks until at least n records were captured or ctx ends, and
// returns the records. Records that gRPC's stats hooks write may land just
// after the caller got its error.
func (r *Recorder) WaitFor(ctx context.Context, n int) ([]Record, error) {
	for {
		r.store.mu.Lock()
		recs, added := slices.Clone(r.store.records), r.store.added
		r.store.mu.Unlock()

		if len(recs) >= n {
			return recs, nil
		}

		select {
		case <-added:
		case <-ctx.Done():
			return recs, ctx.Err()
		}
	}
}

// Enabled implements slog.Handler: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: map[string]any{}}

	for _, a := range r.attrs {
		out.Attrs[a.Key] = a.Value.Resolve().Any()
	}

	rec.Attrs(func(a slog.Attr) bool {
		out.Attrs[a.Key] = a.Value.Resolve().Any()

		return true
	})

	s := r.store
	s.mu.Lock()
	defer s.mu.Unlock()

	s.records = append(s.records, out)
	close(s.added)
	s.added = make(chan struct{})

	return nil
}

// WithAttrs implements slog.Handler.
func (r *Recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Recorder{store: r.store, attrs: append(slices.Clone(r.attrs), attrs...)}
}

// WithGroup implements slog.Handler; groups are flattened.
func (r *Recorder) WithGroup(string) slog.Handler { return r }
