package main

import (
	"errors"
	"log/slog"
	"path/filepath"

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

// openAuditLogs opens (appending to) the audit files under state.
func openAuditLogs(state string, log *slog.Logger) (*auditLogs, error) {
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

	tee := func(f *logfile.File) *slog.Logger {
		return slog.New(slog.NewMultiHandler(slog.NewJSONHandler(f, nil), log.Handler())).With(slog.String(logkey.Log, "audit"))
	}

	return &auditLogs{issued: issued, refused: refused, audit: tee(issued), refusals: tee(refused)}, nil
}

// close closes the files; the server must have stopped, so that the last
// summaries of refusals are in.
func (a *auditLogs) close() error {
	return errors.Join(a.issued.Close(), a.refused.Close())
}
