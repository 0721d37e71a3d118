package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/rollout/etcdca"
)

// checkConcurrentAccept applies r's Accept to every node at once: every
// apply succeeds, the members restart one after the other (the ports'
// watch checks they never overlap), and the step is in effect everywhere.
func checkConcurrentAccept(ctx context.Context, t *testing.T, talos *client.Client, r *etcdca.Rotation) {
	t.Helper()

	start := time.Now()
	errs := make([]error, len(r.Nodes))
	details := make([]string, len(r.Nodes))

	var wg sync.WaitGroup

	for i, node := range r.Nodes {
		cfg := nodeConfig(ctx, t, talos, node)
		if err := r.Edit(cfg, etcdca.Accept); err != nil {
			t.Fatal(err)
		}

		data, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		wg.Go(func() {
			resp, err := talos.ApplyConfiguration(client.WithNode(ctx, node), &machine.ApplyConfigurationRequest{
				Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
			})
			errs[i] = err

			if err == nil {
				details[i] = firstLines(resp.GetMessages()[0].GetModeDetails(), 1)
			}
		})
	}

	wg.Wait()

	t.Logf("FIGURE etcd CA rotation: a step applied to the 3 control planes at once: %s", time.Since(start).Round(time.Millisecond))

	for i, node := range r.Nodes {
		if errs[i] != nil {
			t.Fatalf("%s: %v", node, errs[i])
		}

		t.Logf("  %s: %s", node, details[i])

		if err := r.Verify(client.WithNode(ctx, node), etcdca.Accept); err != nil {
			t.Errorf("%s: %v", node, err)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)

	return strings.Join(lines[:min(n, len(lines))], " ")
}

// checkEtcdSwapRefused applies a config whose etcd CA is a CA the node
// does not trust yet: refused, naming the field, nothing changed.
func checkEtcdSwapRefused(ctx context.Context, t *testing.T, talos *client.Client, node string, newCA *ca.CA) {
	cfg := nodeConfig(ctx, t, talos, node)
	cfg.Cluster.Etcd.CA = &certs.CertAndKey{Crt: newCA.CertPEM, Key: newCA.KeyPEM}

	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	_, err = talos.ApplyConfiguration(client.WithNode(ctx, node), &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cluster.etcd.ca: the new etcd CA is not trusted yet") {
		t.Fatalf("an outright swap of the etcd CA: %v", err)
	}

	if after := nodeConfig(ctx, t, talos, node); after.EtcdCA().Cert.Equal(newCA.Cert) {
		t.Fatal("the refused etcd CA is in effect")
	}
}

// nodeConfig is a node's machine config, in full.
func nodeConfig(ctx context.Context, t *testing.T, talos *client.Client, node string) *certs.MachineConfig {
	t.Helper()

	resp, err := machineconfig.NewMachineConfigServiceClient(talos.Conn()).Get(client.WithNode(ctx, node), &machineconfig.GetRequest{})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.ParseMachineConfig(node, resp.GetMessages()[0].GetData(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	return cfg
}

// checkEtcdDowntimes checks that each member's client port closed exactly
// once per restart and its peer port at least once and at most once per
// restart, never two members at once. The client port closes as the
// graceful stop begins, for a second or more. The peer port may close for
// 20 ms only (the new etcd binds it as the old one leaves), under the
// watch's 10 ms polls: on a loaded machine one such close in three went
// unseen.
func checkEtcdDowntimes(t *testing.T, downs []downtime, restarts int) {
	t.Helper()

	per := map[string]int{}

	for i, a := range downs {
		per[a.node+" "+a.port]++

		for _, b := range downs[i+1:] {
			if a.node != b.node && a.start.Before(b.end) && b.start.Before(a.end) {
				t.Errorf("%s (%s port) and %s (%s port) were down at the same time", a.node, a.port, b.node, b.port)
			}
		}
	}

	for what, n := range per {
		switch {
		case strings.HasSuffix(what, " client") && n != restarts:
			t.Errorf("%s port closed %d times, want %d", what, n, restarts)
		case strings.HasSuffix(what, " peer") && n > restarts:
			t.Errorf("%s port closed %d times, want at most %d", what, n, restarts)
		}
	}

	if len(per) != 6 {
		t.Errorf("%d ports of members closed, want 6 (3 members, client and peer)", len(per))
	}
}

// checkOldEtcdCARefused connects to a member with a client certificate of
// each CA: the old one's is refused, the new one's served.
func checkOldEtcdCARefused(t *testing.T, cp localcluster.Node, oldCA, newCA *ca.CA) {
	get := func(from *ca.CA) error {
		issued, keyPEM, err := catest.NewIssuer(t, from, time.Now()).IssueNewKey(ca.KeyRequest{
			CommonName: "probe", Profile: ca.ProfilePeer, Fallback: ca.ECDSAP256,
		})
		if err != nil {
			t.Fatal(err)
		}

		pair, err := tls.X509KeyPair(issued.PEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}

		roots := x509.NewCertPool()
		roots.AddCert(newCA.Cert)

		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{"https://" + cp.Address + ":2379"},
			TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
			DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		})
		if err != nil {
			return err
		}
		defer cli.Close()

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		_, err = cli.Get(ctx, "probe")

		return err
	}

	if err := get(newCA); err != nil {
		t.Fatalf("a client certificate of the new etcd CA: %v", err)
	}

	if err := get(oldCA); err == nil {
		t.Fatal("etcd served a client certificate of the old etcd CA")
	}
}
