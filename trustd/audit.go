package trustd

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
)

// Field names of audit records. Tests and log pipelines match on them.
const (
	AuditDecision   = "decision"
	AuditRequestID  = "request_id"
	AuditTokenID    = "token_id"
	AuditSource     = "source"
	AuditCommonName = "common_name"
	AuditSANs       = "sans"
	AuditSerial     = "serial"
	AuditNotAfter   = "not_after"
	AuditCode       = "code"
	AuditReason     = "reason"
)

// Values of the AuditDecision field, and the messages of the records.
const (
	DecisionIssued  = "issued"
	DecisionRefused = "refused"

	msgIssued  = "certificate issued"
	msgRefused = "certificate refused"
)

// auditRecord collects what one decision is recorded with. Fields stay
// empty when the request was refused before they were known. It never
// holds the token's secret: only the id, which is public.
type auditRecord struct {
	requestID  string
	tokenID    string
	source     string
	commonName string
	sans       []string
	serial     string
	notAfter   time.Time
}

// write emits the record of the decision: issued if err is nil, else
// refused with err as the reason and code as the status the caller got.
func (r *auditRecord) write(ctx context.Context, log *slog.Logger, err error, code codes.Code) {
	attrs := []slog.Attr{
		slog.String(AuditRequestID, r.requestID),
		slog.String(AuditTokenID, r.tokenID),
		slog.String(AuditSource, r.source),
	}

	if r.commonName != "" || len(r.sans) > 0 {
		attrs = append(attrs, slog.String(AuditCommonName, r.commonName), slog.Any(AuditSANs, r.sans))
	}

	if err == nil {
		attrs = append(attrs,
			slog.String(AuditDecision, DecisionIssued),
			slog.String(AuditSerial, r.serial),
			slog.Time(AuditNotAfter, r.notAfter))
		log.LogAttrs(ctx, slog.LevelInfo, msgIssued, attrs...)

		return
	}

	attrs = append(attrs,
		slog.String(AuditDecision, DecisionRefused),
		slog.String(AuditCode, code.String()),
		slog.String(AuditReason, err.Error()))
	log.LogAttrs(ctx, slog.LevelWarn, msgRefused, attrs...)
}

// newRequestID draws a short random reference that ties an audit record to
// the error a caller saw.
func newRequestID(r io.Reader) string {
	buf := make([]byte, requestIDSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		// A reference is a convenience; the record is written regardless.
		return "none"
	}

	return hex.EncodeToString(buf)
}
