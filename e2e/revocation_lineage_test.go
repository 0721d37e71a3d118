package e2e

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/renewal"
)

// renewCertificate renews c through node's certificate service with c
// itself, as aegisctl config renew does, and returns the new certificate.
func renewCertificate(t *testing.T, c revokedCert, node string) revokedCert {
	t.Helper()

	r, err := renewal.NewClientRenewal(c.leaf, nil)
	if err != nil {
		t.Fatal(err)
	}

	resp, err := certificates.NewCertificateServiceClient(c.conn(t, node)).Renew(etcdCtx(t),
		&certificates.RenewRequest{Csr: r.CSR, Ttl: durationpb.New(r.TTL)})
	if err != nil {
		t.Fatal(err)
	}

	crt := resp.GetMessages()[0].GetCrt()

	pair, err := tls.X509KeyPair(crt, r.KeyPEM())
	if err != nil {
		t.Fatal(err)
	}

	leaf, err := ca.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}

	return revokedCert{admin: admin{roots: c.roots, cert: pair}, leaf: leaf}
}

// checkRevokeLineage renews a certificate twice in a chain (parent, child,
// grandchild) and once more from the parent (a sibling of the child), then
// revokes the child: the revocation names the grandchild, whose open
// connections and follows are refused on the control plane and the worker
// and whose new connections and renewal are refused, while the parent and
// the sibling are still served.
func checkRevokeLineage(t *testing.T, a admin, cp, worker localcluster.Node) {
	parent := newAdminCertificate(t, a, cp.Address)
	child := renewCertificate(t, parent, cp.Address)
	grandchild := renewCertificate(t, child, cp.Address)
	sibling := renewCertificate(t, parent, cp.Address)
	nodes := []localcluster.Node{cp, worker}

	conns := map[string]*grpc.ClientConn{}
	follows := map[string]machine.MachineService_EventsClient{}

	for _, n := range nodes {
		conns[n.Name] = grandchild.conn(t, n.Address)
		follows[n.Name] = openFollow(t, conns[n.Name], n.Name)
	}

	serial := child.leaf.SerialNumber.Text(16)

	resp, err := revocations.NewRevocationServiceClient(a.conn(t, cp.Address)).Revoke(etcdCtx(t), &revocations.RevokeRequest{
		Serial: serial, NotAfter: timestamppb.New(child.leaf.NotAfter), Reason: "e2e lineage",
	})
	if err != nil {
		t.Fatal(err)
	}

	revoked := time.Now()

	var covered []string
	for _, d := range resp.GetMessages()[0].GetDescendants() {
		covered = append(covered, d.GetSerial())
	}

	if want := []string{grandchild.leaf.SerialNumber.Text(16)}; !slices.Equal(covered, want) {
		t.Errorf("the revocation of %s covers %v, want its grandchild %v", serial, covered, want)
	}

	var wg sync.WaitGroup

	for _, n := range nodes {
		wg.Go(func() { waitCallRefused(t, conns[n.Name], n.Name, revoked) })
		wg.Go(func() { waitFollowEnded(t, follows[n.Name], n.Name, revoked) })
	}

	wg.Wait()

	for _, n := range nodes {
		checkHandshakeRefused(t, grandchild, n)
	}

	checkRenewalRefused(t, grandchild, cp)

	// Both nodes enforce the list that holds the grandchild by now: what
	// they still serve, they serve with the revocation known.
	for _, kept := range []revokedCert{parent, sibling} {
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := machine.NewMachineServiceClient(kept.conn(t, n.Address)).Version(ctx, &emptypb.Empty{})

			cancel()

			if err != nil {
				t.Errorf("%s refuses %s, which the revocation of %s does not cover: %v", n.Name,
					kept.leaf.SerialNumber.Text(16), serial, err)
			}
		}
	}
}

// checkRevokeCLICoversRenewal: a client config renewed once (what a thief
// with a leaked config does first) is refused on every node once the
// certificate it was renewed from is revoked by serial, and aegisctl says
// that the revocation covers two certificates, naming the renewed one.
func checkRevokeCLICoversRenewal(t *testing.T, c *cliCluster, cp, worker localcluster.Node) {
	cfg := c.configNew(t, "renewed", "--roles", "os:admin")
	leaked := configSerial(t, cfg)

	c.ok(t, cfg, "config", "renew")

	renewed := configSerial(t, cfg)
	out := c.ok(t, c.admin(), "config", "revoke", leaked, "--reason", "leaked")

	if !strings.Contains(out, "covers:") || !strings.Contains(out, "2 certificates (it and 1 renewed from it)") ||
		!strings.Contains(out, "renewed from it:") || !strings.Contains(out, renewed) {
		t.Errorf("config revoke %s does not say it covers the renewed %s:\n%s", leaked, renewed, out)
	}

	for _, n := range []localcluster.Node{cp, worker} {
		waitUntil(t, "the renewed config refused by "+n.Name, func() bool {
			return c.ctl(t, cfg, "-e", n.Address, "version").code != 0
		})
	}
}

// configSerial is the serial of the current context's certificate in the
// client config at path.
func configSerial(t *testing.T, path string) string {
	t.Helper()

	cfg, err := certs.LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}

	_, cc, err := cfg.Current()
	if err != nil {
		t.Fatal(err)
	}

	cert, err := ca.ParseCertificate(cc.Crt)
	if err != nil {
		t.Fatal(err)
	}

	return cert.SerialNumber.Text(16)
}
