package e2e

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestNTPServerComesBackSkewed: trustd syncs with a real chronyd, which
// then dies and comes back serving a clock an hour ahead (faketime). The
// time gate closes at trustd's next poll: trustd refuses with
// FailedPrecondition, says NOT_SERVING, and audits the refusal.
func TestNTPServerComesBackSkewed(t *testing.T) {
	needBinaries(t)
	t.Parallel()

	const ip, trustdIP = "127.8.3.1", "127.8.3.2"

	port := freePort(t, "udp", ip)
	ntpd := runChrony(t, ip, port, "")
	n := newNode(t, trustdIP, ntpd.addr)
	// The gate closes at the next poll: ask every 2 s rather than NTP's 64.
	n.cfg.Machine.Time.PollInterval = 2 * time.Second
	n.save(t)
	proc := n.start(t)

	n.waitHealth(t, "127.8.3.9", healthpb.HealthCheckResponse_SERVING)

	ctx := testContext(t)
	tok := n.cfg.TrustdToken().Reveal()
	csr := trustdtest.SourceCSR(t, ca.Ed25519, "127.8.3.10")

	if _, err := trustdtest.Call(ctx, n.security(t, "127.8.3.10"), tok, csr); err != nil {
		t.Fatalf("certificate while synced: %v", err)
	}

	ntpd.kill()
	runChrony(t, ip, port, "+1h")

	// The gate closes at the time service's next poll; until then trustd
	// still signs, as it should with a clock last seen in sync.
	client := n.security(t, "127.8.3.10") // the address the CSR names
	deadline := time.Now().Add(faultTimeout)

	for {
		_, err := trustdtest.Call(ctx, client, tok, csr)
		if status.Code(err) == codes.FailedPrecondition {
			break
		}

		if err != nil {
			t.Fatalf("while waiting for the gate to close: %v", err)
		}

		if time.Now().After(deadline) {
			t.Fatal("the time gate never closed")
		}

		time.Sleep(time.Second)
	}

	n.waitHealth(t, "127.8.3.12", healthpb.HealthCheckResponse_NOT_SERVING)

	recs := proc.audit()
	last := recs[len(recs)-1]

	if last["decision"] != "refused" || last["code"] != codes.FailedPrecondition.String() || fmt.Sprint(last["reason"]) != "trustd: time not synced" {
		t.Fatalf("last audit record: %v", last)
	}
}
