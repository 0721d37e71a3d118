package trustd_test

import (
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
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Clock: clk, RateLimit: trustd.RateLimit{Burst: 3, Refill: time.Minute}})
	ctx := testContext(t)
	// A store token that allows the name, so one CSR does for every source.
	good := trustdtest.CSR(t, ca.Ed25519, "node-1", "node-1")
	allowed := env.CreateToken(t, time.Hour, 0, "node-1")
	bad := "zzzzzz.0123456789abcdef"

	call := func(t *testing.T, source, tok string, csr []byte, want codes.Code) {
		t.Helper()

		if _, err := trustdtest.Call(ctx, env.Client(t, source), tok, csr); status.Code(err) != want {
			t.Fatalf("from %s: %v, want %s", source, err, want)
		}
	}

	t.Run("failures lock a source out", func(t *testing.T) {
		for range 3 {
			call(t, "127.0.1.21", bad, good, codes.Unauthenticated)
		}

		before := len(env.Audit.Records())
		call(t, "127.0.1.21", trustdtest.StaticToken, good, codes.ResourceExhausted)

		recs := env.Audit.Records()[before:]
		if len(recs) != 1 || recs[0].String(trustd.AuditCode) != "ResourceExhausted" || recs[0].String(trustd.AuditTokenID) != "static" {
			t.Fatalf("audit of the rate-limited call: %+v", recs)
		}
	})

	t.Run("other sources unaffected", func(t *testing.T) {
		call(t, "127.0.1.22", allowed, good, codes.OK)
	})

	t.Run("refill forgives one failure", func(t *testing.T) {
		clk.Advance(time.Minute)
		call(t, "127.0.1.21", allowed, good, codes.OK)
		call(t, "127.0.1.21", bad, good, codes.Unauthenticated)
		call(t, "127.0.1.21", allowed, good, codes.ResourceExhausted)
	})

	t.Run("bad CSRs and oversized messages count", func(t *testing.T) {
		before := len(env.Audit.Records())

		call(t, "127.0.1.23", trustdtest.StaticToken, []byte("junk"), codes.InvalidArgument)
		call(t, "127.0.1.23", trustdtest.StaticToken, make([]byte, 10<<20), codes.ResourceExhausted)
		call(t, "127.0.1.23", trustdtest.StaticToken, []byte("junk"), codes.InvalidArgument)

		// The oversized message's failure is counted by a stats hook that
		// may run just after the caller got its error; wait for its record.
		if _, err := env.Audit.WaitFor(ctx, before+3); err != nil {
			t.Fatal(err)
		}

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
