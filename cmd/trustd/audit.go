package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/logfile"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/trustd"
)

// Names of the audit files in the state's trustd directory.
const (
	auditFile    = "audit.log"
	refusalsFile = "refusals.log"
)

// auditLogs are trustd's audit trail: issuances and token management in
// DIR/trustd/audit.log, refusals (aggregated by the server) in
// DIR/trustd/refusals.log, each rotated by size on its own, so no amount
// of refusals rotates an issuance record out. Every record is also
// written to the operational log with "log":"audit", for machined's log
// capture; that copy has the operational log's retention, not theirs.
type auditLogs struct {
	issued, refused *logfile.File
	audit, refusals *slog.Logger
}

// opsLog is where the operational log goes and its least level: the audit
// records are copied there.
type opsLog struct {
	w     io.Writer
	level slog.Leveler
}

// openAuditLogs opens (appending to) the audit files under state.
func openAuditLogs(state string, ops opsLog) (*auditLogs, error) {
	dir := filepath.Join(state, "trustd")

	issued, err := logfile.Open(filepath.Join(dir, auditFile), trustd.AuditFileSize, trustd.AuditFilesKept)
	if err != nil {
		return nil, err
	}

	refused, err := logfile.Open(filepath.Join(dir, refusalsFile), trustd.RefusalsFileSize, trustd.RefusalsFilesKept)
	if err != nil {
		issued.Close() //nolint:errcheck // already failing

		return nil, err
	}

	tee := func(f *logfile.File, commit func() error) *slog.Logger {
		h := newAuditHandler(f, ops)
		h.commit = commit

		return slog.New(h).With(slog.String(logkey.Log, "audit"))
	}

	// Issuance records are on disk before their certificate leaves;
	// refusals need not wait for the disk.
	return &auditLogs{issued: issued, refused: refused, audit: tee(issued, issued.Commit), refusals: tee(refused, nil)}, nil
}

// auditHandler writes a record as one JSON line to its file and, when the
// operational log's level lets it through, the same bytes to the
// operational log: each record is formatted once, on the caller's path
// (an issuance's record is written before its reply). Records below Info
// are not audit records and are dropped. With commit, Handle returns once
// the record is on disk: commit runs after slog's handler let go of its
// lock, so that records written at once share a sync.
type auditHandler struct {
	both, fileOnly slog.Handler
	opsLevel       slog.Leveler
	commit         func() error
}

func newAuditHandler(f io.Writer, ops opsLog) *auditHandler {
	opts := &slog.HandlerOptions{ReplaceAttr: daemonflag.DurationsAsText}
	h := &auditHandler{fileOnly: slog.NewJSONHandler(f, opts), opsLevel: ops.level}
	h.both = h.fileOnly

	if ops.w != nil && ops.level != nil {
		h.both = slog.NewJSONHandler(pairWriter{f, ops.w}, opts)
	}

	return h
}

func (h *auditHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.fileOnly.Enabled(ctx, l)
}

func (h *auditHandler) Handle(ctx context.Context, r slog.Record) error {
	w := h.fileOnly
	if h.opsLevel != nil && r.Level >= h.opsLevel.Level() {
		w = h.both
	}

	if err := w.Handle(ctx, r); err != nil || h.commit == nil {
		return err
	}

	return h.commit()
}

func (h *auditHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &auditHandler{both: h.both.WithAttrs(attrs), fileOnly: h.fileOnly.WithAttrs(attrs), opsLevel: h.opsLevel, commit: h.commit}
}

func (h *auditHandler) WithGroup(name string) slog.Handler {
	return &auditHandler{both: h.both.WithGroup(name), fileOnly: h.fileOnly.WithGroup(name), opsLevel: h.opsLevel, commit: h.commit}
}

// pairWriter writes each line to the audit file, then to the operational
// log; a failure of one does not keep the line from the other.
type pairWriter struct{ file, ops io.Writer }

func (p pairWriter) Write(b []byte) (int, error) {
	n, err := p.file.Write(b)
	_, opsErr := p.ops.Write(b)

	return n, errors.Join(err, opsErr)
}

// close closes the files; the server must have stopped, so that the last
// summaries of refusals are in.
func (a *auditLogs) close() error {
	return errors.Join(a.issued.Close(), a.refused.Close())
}
