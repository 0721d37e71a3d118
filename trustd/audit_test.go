package trustd_test

import (
	"context"
	"errors"
	"log/slog"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

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

// announceThenFail is a signer that announces a certificate, as
// ca.Issuer does before it signs, and then fails.
type announceThenFail struct{}

var errSignerBroken = errors.New("signer broken")

func (announceThenFail) Issue(req ca.Request) (*ca.Issued, error) {
	req.Signing(big.NewInt(0xabc), time.Unix(1e9, 0).UTC())

	return nil, errSignerBroken
}

// TestFailedSigningFollowsItsRecord: when signing fails after the record
// was written, no certificate leaves, and the call's Internal refusal
// follows the record under the same request id.
func TestFailedSigningFollowsItsRecord(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{
		GateOpen: true,
		Signer:   func(trustd.Signer) trustd.Signer { return announceThenFail{} },
	})
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	resp, err := trustdtest.Call(testContext(t), env.Client(t, ""), trustdtest.StaticToken, csr)
	if status.Code(err) != codes.Internal || len(resp.GetCrt()) != 0 {
		t.Fatalf("call with the signer failing: %v, %d bytes of certificate", err, len(resp.GetCrt()))
	}

	recs := env.Audit.Records()
	if len(recs) != 2 || recs[0].String(trustd.AuditDecision) != trustd.DecisionIssued || recs[0].String(trustd.AuditSerial) != "abc" ||
		recs[1].String(trustd.AuditCode) != codes.Internal.String() ||
		recs[0].String(trustd.AuditRequestID) != recs[1].String(trustd.AuditRequestID) {
		t.Fatalf("records %+v, want the issuance then its Internal refusal", recs)
	}
}

// slowAudit is an audit log whose write of a record ends only once the
// caller has its answer or a second has passed, whichever comes first;
// done tells whether a record's write has ended.
type slowAudit struct {
	*trustdtest.Recorder

	answered chan struct{}
	done     atomic.Bool
}

func (s *slowAudit) Handle(ctx context.Context, r slog.Record) error {
	select {
	case <-s.answered:
	case <-time.After(time.Second):
	}

	s.done.Store(true)

	return s.Recorder.Handle(ctx, r)
}

func (s *slowAudit) WithAttrs([]slog.Attr) slog.Handler { return s }

// TestCertificateWaitsForItsRecord: the answer does not leave before the
// write of the issuance record has ended, however long the write takes.
func TestCertificateWaitsForItsRecord(t *testing.T) {
	audit := &slowAudit{Recorder: trustdtest.NewRecorder(), answered: make(chan struct{})}
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Audit: slog.New(audit)})
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	_, err := trustdtest.Call(testContext(t), env.Client(t, ""), trustdtest.StaticToken, csr)
	recorded := audit.done.Load()

	close(audit.answered)

	if err != nil || !recorded {
		t.Fatalf("answer %v before the record was written: %v", err, !recorded)
	}
}
