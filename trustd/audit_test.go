package trustd_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// failingAudit is an audit log whose disk is gone: every record fails.
type failingAudit struct{ slog.Handler }

var errDiskGone = errors.New("disk gone")

func (failingAudit) Handle(context.Context, slog.Record) error { return errDiskGone }
func (f failingAudit) WithAttrs([]slog.Attr) slog.Handler      { return f }

// TestUnrecordedIssuanceIsWithheld: a certificate whose issuance record
// cannot be written is never handed out; the caller gets Internal with a
// reference, and the refusal names the cause.
func TestUnrecordedIssuanceIsWithheld(t *testing.T) {
	recorder := trustdtest.NewRecorder()
	env := trustdtest.Start(t, trustdtest.Options{
		GateOpen: true,
		Audit:    slog.New(failingAudit{recorder}),
		Refusals: recorder.Logger(),
	})
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	resp, err := trustdtest.Call(testContext(t), env.Client(t, ""), trustdtest.StaticToken, csr)
	if status.Code(err) != codes.Internal || len(resp.GetCrt()) != 0 {
		t.Fatalf("call with the audit log failing: %v, %d bytes of certificate", err, len(resp.GetCrt()))
	}

	recs := recorder.Records()
	if len(recs) != 1 || recs[0].String(trustd.AuditDecision) != trustd.DecisionRefused ||
		recs[0].String(trustd.AuditCode) != codes.Internal.String() {
		t.Fatalf("records %+v, want one Internal refusal", recs)
	}
}
