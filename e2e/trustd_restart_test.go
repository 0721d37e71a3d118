package e2e

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestTrustdRestart: tokens and their use counts survive a restart of
// trustd on the same state directory.
func TestTrustdRestart(t *testing.T) {
	needBinaries(t)

	ntpd := startChrony(t, "127.0.1.70")
	n := newNode(t, "127.0.1.71", ntpd.addr)
	csr := trustdtest.SourceCSR(t, ca.Ed25519, "127.0.1.72")
	ctx := testContext(t)

	first := n.start(t)
	n.waitServing(t)

	tc := n.tokens(t)
	single := createToken(ctx, t, tc, &tokens.CreateRequest{MaxUses: 1, Description: "single"})
	triple := createToken(ctx, t, tc, &tokens.CreateRequest{MaxUses: 3, Description: "triple"})

	for _, tok := range []string{single, triple} {
		if _, err := trustdtest.Call(ctx, n.security(t, "127.0.1.72"), tok, csr); err != nil {
			t.Fatal(err)
		}
	}

	if err := first.stop(); err != nil {
		t.Fatalf("trustd did not stop cleanly: %v", err)
	}

	n.start(t)
	n.waitServing(t)

	list, err := n.tokens(t).List(ctx, &tokens.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	uses := map[string]uint32{}
	for _, tok := range list.GetMessages()[0].GetTokens() {
		uses[tok.GetDescription()] = tok.GetUses()
	}

	if uses["single"] != 1 || uses["triple"] != 1 || len(uses) != 2 {
		t.Fatalf("uses after restart: %v", uses)
	}

	client := n.security(t, "127.0.1.72") // the address the CSR names

	if _, err = trustdtest.Call(ctx, client, single, csr); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("single-use token after restart: %v", err)
	}

	for i := range 2 {
		if _, err = trustdtest.Call(ctx, client, triple, csr); err != nil {
			t.Fatalf("use %d of the triple token: %v", i+2, err)
		}
	}

	if _, err = trustdtest.Call(ctx, client, triple, csr); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("fourth use of the triple token: %v", err)
	}
}

// TestTrustdNotSynced: the NTP server stops before trustd ever syncs, so
// every request is refused as time-not-synced, nothing is issued, and the
// health service says NOT_SERVING.
func TestTrustdNotSynced(t *testing.T) {
	needBinaries(t)

	ntpd := startChrony(t, "127.0.1.80")
	ntpd.stop()

	n := newNode(t, "127.0.1.81", ntpd.addr)
	proc := n.start(t)
	ctx := testContext(t)
	csr := trustdtest.CSR(t, ca.Ed25519, "worker-1", "worker-1")
	stored := createToken(ctx, t, n.tokens(t), &tokens.CreateRequest{MaxUses: 1})

	const calls = 6

	for i := range calls {
		tok := n.cfg.TrustdToken().Reveal()
		if i%2 == 1 {
			tok = stored
		}

		_, err := trustdtest.Call(ctx, n.security(t, "127.0.1.82"), tok, csr)
		if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != "trustd: time not synced" {
			t.Fatalf("call %d: %v, want FailedPrecondition: time not synced", i, err)
		}
	}

	hc := healthpb.NewHealthClient(n.conn(t, "127.0.1.83"))
	if resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health = %v, %v; want NOT_SERVING", resp, err)
	}

	// The calls came from one source: the first refusal is written in
	// full, the others counted in the summary trustd writes as it stops.
	records := proc.audit()
	if len(records) != 1 || records[0]["decision"] != "refused" || records[0]["code"] != "FailedPrecondition" {
		t.Fatalf("audit records %v, want one time-not-synced refusal in full", records)
	}

	// The refusals spent nothing: the single-use token is unused.
	list, err := n.tokens(t).List(ctx, &tokens.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if u := list.GetMessages()[0].GetTokens()[0].GetUses(); u != 0 {
		t.Fatalf("token uses = %d after refusals", u)
	}

	// The time service reports the unreachable server after its first
	// round, which a slow machine may not have finished yet.
	for !hasRecord(proc.logs, "no NTP server gave a valid reply") {
		select {
		case <-ctx.Done():
			t.Fatal("the time service never reported the unreachable server")
		case <-time.After(50 * time.Millisecond):
		}
	}

	if err := proc.stop(); err != nil {
		t.Fatalf("trustd stopped with %v", err)
	}

	issuedRecs, refusedRecs := n.auditTrail(t)
	if issued, _ := accounted(issuedRecs); issued != 0 {
		t.Fatalf("%d issuance records", issued)
	}

	if _, refused := accounted(refusedRecs); refused != calls {
		t.Fatalf("%d refusals accounted for, want %d: %v", refused, calls, refusedRecs)
	}

	if sum := refusedRecs[len(refusedRecs)-1]; sum["msg"] != "certificate refusals" || sum["kinds"].(map[string]any)["FailedPrecondition"] != float64(calls-1) {
		t.Fatalf("summary %v", sum)
	}
}
