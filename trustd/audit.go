package trustd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// Field names of audit records. Tests and log pipelines match on them.
const (
	AuditDecision   = logkey.Decision
	AuditRequestID  = logkey.RequestID
	AuditTokenID    = logkey.TokenID
	AuditTokenKind  = logkey.TokenKind
	AuditSource     = logkey.Source
	AuditCommonName = logkey.CommonName
	AuditSANs       = logkey.SANs
	AuditSerial     = logkey.Serial
	AuditNotAfter   = logkey.NotAfter
	AuditCode       = logkey.RefusalCode
	AuditReason     = logkey.Reason
	// AuditCount, AuditKinds and AuditSince are the fields of a summary
	// of refusals: how many refusals of the source since when were not
	// written in full, and their count by code. AuditSource names the
	// source: an IPv4 address, an IPv6 /64, or "other" for the sources
	// beyond MaxRefusalSources.
	AuditCount = logkey.Count
	AuditKinds = logkey.Kinds
	AuditSince = logkey.Since
)

// Values of the AuditDecision field, and the messages of the records.
const (
	DecisionIssued  = "issued"
	DecisionRefused = "refused"

	// Values of the AuditTokenKind field: which token an authenticated
	// request used (never its secret).
	TokenKindStatic         = "static"
	TokenKindStaticPrevious = "static-previous"
	TokenKindStored         = "stored"

	msgIssued  = "certificate issued"
	msgRefused = "certificate refused"
	// MsgRefusals is the message of a summary of refusals.
	MsgRefusals = "certificate refusals"
)

// auditRecord collects what one decision is recorded with. Fields stay
// empty when the request was refused before they were known. It never
// holds the token's secret: only the id, which is public.
type auditRecord struct {
	requestID  string
	tokenID    string
	tokenKind  string // empty until the token is authenticated
	source     string
	key        string // the source as refusals are counted: source.Key
	commonName string
	sans       []string
	serial     string
	notAfter   time.Time
}

// newAuditRecord starts the record of a decision about a call from c.
func (s *Server) newAuditRecord(c *caller) auditRecord {
	return auditRecord{requestID: requestid.New(s.cfg.Rand), source: c.name, key: c.key}
}

// errRecording is the failure to write an issuance's record.
var errRecording = errors.New("trustd: writing the issuance record")

// recordIssued writes the record of an issuance to the audit log, through
// the handler itself, not slog.Logger, which drops a handler's error: a
// durable audit file returns once the record is synced, or with the error
// that kept it from disk, and then the certificate is never handed out.
func (s *Server) recordIssued(ctx context.Context, r *auditRecord) error {
	h := s.cfg.Audit.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return nil
	}

	// No program counter: the record names its source in its fields, and
	// slog would walk the stack for one on every call.
	rec := slog.NewRecord(s.cfg.Clock.Now(), slog.LevelInfo, msgIssued, 0)
	rec.AddAttrs(r.common()...)
	rec.AddAttrs(
		slog.String(AuditDecision, DecisionIssued),
		slog.String(AuditSerial, r.serial),
		slog.Time(AuditNotAfter, r.notAfter))

	if err := h.Handle(ctx, rec); err != nil {
		return fmt.Errorf("%w: %w", errRecording, err)
	}

	return nil
}

// common returns the fields every record of a decision has.
func (r *auditRecord) common() []slog.Attr {
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String(AuditRequestID, r.requestID),
		slog.String(AuditTokenID, r.tokenID),
		slog.String(AuditSource, r.source),
	)

	if r.tokenKind != "" {
		attrs = append(attrs, slog.String(AuditTokenKind, r.tokenKind))
	}

	if r.commonName != "" || len(r.sans) > 0 {
		attrs = append(attrs, slog.String(AuditCommonName, r.commonName), slog.Any(AuditSANs, r.sans))
	}

	return attrs
}

// auditRefused writes the record of a refusal, with err as the reason and
// code as the status the caller got, to the refusals aggregator, which
// writes the first refusal of a source per interval in full and counts
// the rest. Internal errors are written in full always.
func (s *Server) auditRefused(ctx context.Context, r *auditRecord, err error, code codes.Code) {
	s.decisions.count(err, r.tokenKind)

	attrs := append(r.common(),
		slog.String(AuditDecision, DecisionRefused),
		slog.String(AuditCode, code.String()),
		slog.String(AuditReason, err.Error()))

	// An internal error is trustd's own failure, not the caller's, and
	// its reference is all the caller got to find the cause by.
	if code == codes.Internal {
		s.cfg.Refusals.LogAttrs(ctx, slog.LevelWarn, msgRefused, attrs...)

		return
	}

	s.refusals.Refuse(ctx, r.key, code.String(), msgRefused, attrs...)
}

// tokenKind names the kind of token a grant is of, for the audit record.
func tokenKind(g Grant) string {
	switch {
	case g.Static && g.Previous:
		return TokenKindStaticPrevious
	case g.Static:
		return TokenKindStatic
	default:
		return TokenKindStored
	}
}
