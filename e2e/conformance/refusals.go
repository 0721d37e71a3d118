package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd"
)

// floodCalls is how many refusals the flood cases provoke from one source:
// past the failure limit, so refusals of two codes are summarized.
const floodCalls = 3 * trustd.DefaultFailureBurst

// Messages of the refusal lines, as the services write them.
const (
	msgHandshakeRefused  = "tls handshake refused"
	msgHandshakesRefused = "tls handshakes refused"
)

// refusalCases: a flood of refusals from one source leaves one line in
// full and one summary that counts the rest, in trustd's audit records and
// in apid's log alike, so no flood can push other records out.
func refusalCases() []*Case {
	want := floodOutcome(floodCalls)

	return []*Case{
		{Group: "apid", Name: fmt.Sprintf("%d refused handshakes from one source", floodCalls), Expected: want, Run: handshakeFlood},
		{Group: "trustd", Name: fmt.Sprintf("%d bad-token calls from one source", floodCalls), Expected: want, Run: tokenFlood},
	}
}

func handshakeFlood(ctx context.Context, e *Env, r *Report) string {
	source, err := e.sources.take()
	if err != nil {
		r.Problemf("%v", err)

		return "not run"
	}

	// An expired certificate of an accepted CA: the client sends it and
	// the handshake refuses it. (Without a certificate, or with one of a CA
	// apid does not ask for, the handshake completes and the calls are
	// refused; see healthCases.)
	cfg := e.clientTLS(e.Target, e.ids.expired)

	for i := range floodCalls {
		if got, err := handshakeFrom(ctx, apidAddr(e.Target), source, cfg); got != tlsRefused {
			r.Problemf("handshake %d: %s (%v)", i+1, got, err)
		}
	}

	return e.summarized(ctx, "apid", source, msgHandshakeRefused, msgHandshakesRefused,
		func(rec auditRecord) bool { return strings.HasPrefix(rec.str(logkey.Peer), source+":") },
		apid.HandshakeRefusalInterval, r)
}

func tokenFlood(ctx context.Context, e *Env, r *Report) string {
	source, err := e.sources.take()
	if err != nil {
		r.Problemf("%v", err)

		return "not run"
	}

	good, err := goodCSR("conformance-flood")
	if err != nil {
		r.Problemf("building the CSR: %v", err)

		return "not run"
	}

	for i := range floodCalls {
		_, err := e.certify(ctx, e.Target, source, []string{wire.MetadataToken, "zzzzzz.zzzzzzzzzzzzzzzz"}, good)
		if c := codeOf(err); c != codes.Unauthenticated.String() && c != codes.ResourceExhausted.String() {
			r.Problemf("call %d ended %s", i+1, c)
		}
	}

	return e.summarized(ctx, "trustd", source, auditMsgRefused, trustd.MsgRefusals,
		func(rec auditRecord) bool { return rec.str(auditSource) == source }, trustd.RefusalInterval, r)
}

// summarized waits (up to the service's interval and then some) for the
// summary of source in service's log on the target, and describes what it
// found: the refusals of source in full and those the summary counts.
func (e *Env) summarized(ctx context.Context, service, source, full, summary string, fromSource func(auditRecord) bool, interval time.Duration, r *Report) string {
	var inFull, counted, summaries int

	err := e.poll(ctx, interval+auditWait, func() error {
		recs, err := e.serviceLog(ctx, e.Target, service)
		if err != nil {
			return err
		}

		inFull, counted, summaries = 0, 0, 0

		for _, rec := range recs {
			switch {
			case rec.str("msg") == full && fromSource(rec):
				inFull++
			case rec.str("msg") == summary && rec.str(logkey.Source) == source:
				summaries++
				n, _ := rec[logkey.Count].(float64)
				counted += int(n)
			}
		}

		if inFull+counted < floodCalls {
			return fmt.Errorf("%d refusals from %s in %s's log, %d in full, want %d", inFull+counted, source, service, inFull, floodCalls)
		}

		return nil
	})
	if err != nil {
		r.Problemf("%v", err)
	}

	// The flood may straddle the end of an interval: then each interval
	// has its line in full and its summary.
	if inFull == 0 || inFull > 2 || summaries > inFull {
		return fmt.Sprintf("%d refusals: %d in full, %d in %d summaries", inFull+counted, inFull, counted, summaries)
	}

	return floodOutcome(inFull + counted)
}

func floodOutcome(n int) string {
	return fmt.Sprintf("%d refusals: one in full per interval, the rest in its summary", n)
}
