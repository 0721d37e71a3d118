package trustd_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

func TestRateLimit(t *testing.T) {
	clk := clock.NewFake(time.Now())
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Clock: clk, RateLimit: trustd.RateLimit{Burst: 3, Refill: time.Hour}})
	ctx := testContext(t)
	// A store token that allows the name, so one CSR does for every source.
	good := trustdtest.CSR(t, ca.Ed25519, "node-1", "node-1")
	allowed := env.CreateToken(t, 24*time.Hour, 0, "node-1")
	bad := "zzzzzz.0123456789abcdef"

	call := func(t *testing.T, source, tok string, csr []byte, want codes.Code) {
		t.Helper()

		if _, err := trustdtest.Call(ctx, env.Client(t, source), tok, csr); status.Code(err) != want {
			t.Fatalf("from %s: %v, want %s", source, err, want)
		}
	}

	t.Run("failures lock a source out", func(t *testing.T) {
		before := len(env.Audit.Records())

		for range 3 {
			call(t, "127.0.1.21", bad, good, codes.Unauthenticated)
		}

		call(t, "127.0.1.21", trustdtest.StaticToken, good, codes.ResourceExhausted)

		// The first refusal is written in full; the others are counted
		// into the source's summary at the interval's end.
		recs := env.Audit.Records()[before:]
		if len(recs) != 1 || recs[0].String(trustd.AuditCode) != "Unauthenticated" {
			t.Fatalf("audit records in full: %+v", recs)
		}

		sum := endInterval(t, clk, env, before+2)[before+1]
		if sum.Message != trustd.MsgRefusals || sum.String(trustd.AuditSource) != "127.0.1.21" || sum.Int(trustd.AuditCount) != 3 {
			t.Fatalf("summary: %+v", sum)
		}

		kinds, _ := sum.Attrs[trustd.AuditKinds].(map[string]int)
		if kinds["Unauthenticated"] != 2 || kinds["ResourceExhausted"] != 1 {
			t.Fatalf("summary by code: %v", kinds)
		}
	})

	t.Run("other sources unaffected", func(t *testing.T) {
		call(t, "127.0.1.22", allowed, good, codes.OK)
	})

	t.Run("refill forgives one failure", func(t *testing.T) {
		clk.Advance(time.Hour)
		call(t, "127.0.1.21", allowed, good, codes.OK)
		call(t, "127.0.1.21", bad, good, codes.Unauthenticated)
		call(t, "127.0.1.21", allowed, good, codes.ResourceExhausted)
	})

	t.Run("bad CSRs and oversized messages count", func(t *testing.T) {
		before := len(env.Audit.Records())

		// The oversized message's failure is counted by a stats hook that
		// may run just after the caller got its error, and before its
		// record is written; wait for the record, the source's first.
		call(t, "127.0.1.23", trustdtest.StaticToken, make([]byte, 10<<20), codes.ResourceExhausted)

		if _, err := env.Audit.WaitFor(ctx, before+1); err != nil {
			t.Fatal(err)
		}

		call(t, "127.0.1.23", allowed, []byte("junk"), codes.InvalidArgument)
		call(t, "127.0.1.23", allowed, []byte("junk"), codes.InvalidArgument)
		call(t, "127.0.1.23", allowed, good, codes.ResourceExhausted)
	})

	t.Run("closed time gate does not count", func(t *testing.T) {
		env.Gate.Set(false)

		for range 5 {
			call(t, "127.0.1.24", allowed, good, codes.FailedPrecondition)
		}

		env.Gate.Set(true)
		call(t, "127.0.1.24", allowed, good, codes.OK)
	})
}

// endInterval ends the interval of refusal counts on the fake clock and
// waits until the audit holds n records.
func endInterval(t *testing.T, clk *clock.Fake, env *trustdtest.Env, n int) []trustdtest.Record {
	t.Helper()

	ctx := testContext(t)
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	clk.Advance(trustd.RefusalInterval)

	recs, err := env.Audit.WaitFor(ctx, n)
	if err != nil {
		t.Fatalf("%v: %+v", err, recs)
	}

	return recs
}

// TestRateLimitFloodSparesNewSources: failing sources many times the
// table's size fill it, and a node that never failed still joins with a
// valid token; the flood's sources were each limited on their own.
func TestRateLimitFloodSparesNewSources(t *testing.T) {
	clk := clock.NewFake(time.Now())
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Clock: clk, RateLimit: trustd.RateLimit{Burst: 1, Refill: time.Hour, MaxSources: 4}})
	ctx := testContext(t)
	good := trustdtest.CSR(t, ca.Ed25519, "node-1", "node-1")
	// The static token obtains the caller's own address only.
	fresh := trustdtest.CSR(t, ca.Ed25519, "127.0.2.200", "127.0.2.200")

	for i := range 40 {
		src := fmt.Sprintf("127.0.2.%d", 10+i)
		c := env.Client(t, src)

		if _, err := trustdtest.Call(ctx, c, "zzzzzz.0123456789abcdef", good); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("first failure from %s: %v", src, err)
		}

		if _, err := trustdtest.Call(ctx, c, trustdtest.StaticToken, good); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s after its burst: %v, want ResourceExhausted", src, err)
		}
	}

	if _, err := trustdtest.Call(ctx, env.Client(t, "127.0.2.200"), trustdtest.StaticToken, fresh); err != nil {
		t.Fatalf("a source that never failed, after the flood: %v", err)
	}
}
