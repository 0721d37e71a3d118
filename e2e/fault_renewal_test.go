package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"
)

// renewalTTL is the node certificates' lifetime in the renewal fault test:
// long enough for the control plane to die, stay dead across several
// renewal attempts and come back on a busy machine, short enough for a
// test.
const renewalTTL = 3 * time.Minute

// Messages of the worker's renewal loop (certs/renew.go).
const (
	msgRenewFailed = "certificate renewal failed; keeping the current one"
	msgRenewed     = "certificate renewed"
)

// TestWorkerRenewsAcrossControlPlaneOutage: the control plane dies (every
// process killed) while the worker's certificate is due for renewal. The
// worker keeps its certificate and keeps serving, retries with backoff,
// and renews once the control plane is back, before the old certificate
// expires.
func TestWorkerRenewsAcrossControlPlaneOutage(t *testing.T) {
	needBinaries(t)
	t.Parallel()

	c := localCluster(t, "renewal", "127.8.4.0/24", renewalTTL)
	cp, worker := c.Nodes[0], c.Nodes[1]
	a := clusterAdmin(t, c)

	first, err := a.servedCertificate(worker.Address)
	if err != nil {
		t.Fatal(err)
	}

	if life := first.NotAfter.Sub(first.NotBefore); life != renewalTTL {
		t.Fatalf("worker certificate lives %s, want %s", life, renewalTTL)
	}

	if err = c.Kill(cp.Name); err != nil {
		t.Fatal(err)
	}

	// The worker fails to renew at least twice, keeping its certificate
	// and serving with it meanwhile.
	waitFor(t, "two failed renewals on the worker", func() error {
		if n := len(renewalFailures(t, c.LogPath(worker))); n < 2 {
			return fmt.Errorf("%d failures so far", n)
		}

		return nil
	})

	kept, err := a.servedCertificate(worker.Address)
	if err != nil || !kept.Equal(first) {
		t.Fatalf("worker does not serve its first certificate while the control plane is down: %v", err)
	}

	checkBackoff(t, renewalFailures(t, c.LogPath(worker)))

	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()

	if _, err = machine.NewMachineServiceClient(a.conn(t, worker.Address)).Version(ctx, &emptypb.Empty{}); err != nil {
		t.Fatalf("worker's API while the control plane is down: %v", err)
	}

	if _, err = c.StartNode(ctx, cp.Name, faultTimeout); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "a renewed certificate on the worker", func() error {
		cert, err := a.servedCertificate(worker.Address)
		if err != nil {
			return err
		}

		if cert.Equal(first) {
			return fmt.Errorf("still the first certificate (expires %s)", first.NotAfter.Format(time.TimeOnly))
		}

		if !cert.NotBefore.Before(first.NotAfter) {
			t.Fatalf("renewed certificate issued at %s, after the first expired at %s", cert.NotBefore, first.NotAfter)
		}

		return nil
	})

	if !logged(t, c.LogPath(worker), msgRenewed) {
		t.Fatal("the worker did not log its renewal")
	}
}

// renewalFailures are the worker's failed renewals, in order.
func renewalFailures(t *testing.T, path string) []map[string]any {
	t.Helper()

	var out []map[string]any

	for _, r := range logRecords(t, path) {
		if r["msg"] == msgRenewFailed {
			out = append(out, r)
		}
	}

	return out
}

// checkBackoff requires the failures to be spaced: each announces a wait
// before the next attempt, and the next failure comes no sooner.
func checkBackoff(t *testing.T, failures []map[string]any) {
	t.Helper()

	var prevAt time.Time

	var prevWait time.Duration

	for i, f := range failures {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(f["time"]))
		if err != nil {
			t.Fatalf("failure %d has no time: %v", i, f)
		}

		wait, _ := time.ParseDuration(fmt.Sprint(f["retry_in"])) // "28.07s"
		if wait <= 0 {
			t.Fatalf("failure %d retries without waiting: %v", i, f)
		}

		if i > 0 && at.Sub(prevAt) < prevWait-100*time.Millisecond {
			t.Fatalf("failure %d came %s after the one before, which announced %s", i, at.Sub(prevAt), prevWait)
		}

		prevAt, prevWait = at, wait
	}
}

func logged(t *testing.T, path, msg string) bool {
	t.Helper()

	for _, r := range logRecords(t, path) {
		if r["msg"] == msg {
			return true
		}
	}

	return false
}
