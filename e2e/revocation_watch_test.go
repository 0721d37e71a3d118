package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// resumeDeadline bounds how long a revocation made while no trustd runs
// takes to reach a worker: machined restarts the killed trustds, and the
// worker, which found none, tries again within its backoff (at most 10 s,
// revocation.WatchBackoffMax). Generous, for a loaded machine.
const resumeDeadline = 60 * time.Second

// checkRevocationWatchResumes revokes a certificate on a cluster of three
// control planes and a worker, twice: once with every control plane's
// trustd killed just before (the worker's watch breaks, and resumes from
// its revision once a trustd is back, which brings the revocation made
// meanwhile), and once with all of them up (pushed over the resumed
// watch). The time from each revoke to the worker's refusal is logged.
func checkRevocationWatchResumes(t *testing.T, c *localcluster.Cluster, talos *client.Client, cps []localcluster.Node, worker localcluster.Node) {
	a := clusterAdmin(t, c)
	nodes := []string{cps[0].Address, cps[1].Address, cps[2].Address}

	revoke := func(victim revokedCert) time.Time {
		_, err := revocations.NewRevocationServiceClient(a.conn(t, cps[1].Address)).Revoke(etcdCtx(t), &revocations.RevokeRequest{
			Serial: victim.leaf.SerialNumber.Text(16), NotAfter: timestamppb.New(victim.leaf.NotAfter), Reason: "e2e watch",
		})
		if err != nil {
			t.Fatal(err)
		}

		return time.Now()
	}

	// Served first, so the connections are open before each revoke.
	during, after := newAdminCertificate(t, a, cps[0].Address), newAdminCertificate(t, a, cps[0].Address)
	duringConn, afterConn := during.conn(t, worker.Address), after.conn(t, worker.Address)

	for _, conn := range []*grpc.ClientConn{duringConn, afterConn} {
		if _, err := machine.NewMachineServiceClient(conn).Version(etcdCtx(t), &emptypb.Empty{}); err != nil {
			t.Fatalf("the worker before the revocations: %v", err)
		}
	}

	for node, pid := range servicePIDs(etcdCtx(t), t, talos, nodes, "trustd") {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing trustd on %s: %v", node, err)
		}
	}

	waitCallRefusedWithin(t, duringConn, worker.Name+" (revoked while no trustd ran)", revoke(during), resumeDeadline)

	waitCallRefused(t, afterConn, worker.Name+" (revoked with every trustd up)", revoke(after))
}
