package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// etcdTimeout bounds every wait of the etcd tests: generous, for a busy
// machine, and never a substitute for a condition.
const etcdTimeout = 3 * time.Minute

// etcdCluster creates a local cluster in cidr, destroyed when the test ends.
func etcdCluster(t *testing.T, name, cidr string, controlPlanes, workers int, skipBootstrap bool) *localcluster.Cluster {
	t.Helper()
	needBinaries(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: name, ControlPlanes: controlPlanes, Workers: workers, CIDR: netip.MustParsePrefix(cidr),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: etcdTimeout, SkipBootstrap: skipBootstrap,
		Runtime: certs.RuntimeProcess, // not about containers: the quicker runtime
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 30))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return c
}

func etcdCtx(t *testing.T) context.Context {
	t.Helper()

	c, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	t.Cleanup(cancel)

	return c
}

// eventually retries check until it passes or etcdTimeout runs out.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()

	deadline := time.Now().Add(etcdTimeout)

	for {
		err := check()
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}

		time.Sleep(200 * time.Millisecond)
	}
}

// members lists the etcd members as node knows them, by hostname.
func members(ctx context.Context, c *client.Client, node string) (map[string]*machine.EtcdMember, error) {
	resp, err := c.EtcdMemberList(client.WithNode(ctx, node), &machine.EtcdMemberListRequest{})
	if err != nil {
		return nil, err
	}

	out := map[string]*machine.EtcdMember{}
	for _, m := range resp.GetMessages()[0].GetMembers() {
		out[m.GetHostname()] = m
	}

	return out, nil
}

// votersAre checks that node lists exactly the named members, all voting.
func votersAre(ctx context.Context, c *client.Client, node string, names ...string) error {
	ms, err := members(ctx, c, node)
	if err != nil {
		return err
	}

	return checkVoters(ms, names...)
}

// checkVoters checks that ms holds exactly the named members, all voting.
func checkVoters(ms map[string]*machine.EtcdMember, names ...string) error {
	if len(ms) != len(names) {
		return fmt.Errorf("%d members, want %d: %v", len(ms), len(names), ms)
	}

	for _, n := range names {
		if m, ok := ms[n]; !ok || m.GetIsLearner() {
			return fmt.Errorf("%s missing or a learner: %v", n, ms)
		}
	}

	return nil
}

var etcdStarted = regexp.MustCompile(`^process (\d+) started$`)

// etcdService returns a node's etcd service: state, health and current PID.
func etcdService(ctx context.Context, c *client.Client, node string) (state string, healthy bool, pid int, err error) {
	resp, err := c.ServiceList(client.WithNode(ctx, node))
	if err != nil {
		return "", false, 0, err
	}

	for _, s := range resp.GetMessages()[0].GetServices() {
		if s.GetId() != "etcd" {
			continue
		}

		events := s.GetEvents().GetEvents()
		for i := len(events) - 1; i >= 0 && pid == 0; i-- {
			if m := etcdStarted.FindStringSubmatch(events[i].GetMsg()); m != nil {
				pid, _ = strconv.Atoi(m[1])
			}
		}

		return s.GetState(), s.GetHealth().GetHealthy(), pid, nil
	}

	return "", false, 0, fmt.Errorf("no etcd service on %s", node)
}

// etcdClient is a client of node's etcd with the node's own etcd client certificate.
func etcdClient(t *testing.T, c *localcluster.Cluster, n localcluster.Node) *clientv3.Client {
	t.Helper()

	pki := filepath.Join(c.StatePath(n), "etcd", "pki")

	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "client.crt"), filepath.Join(pki, "client.key"))
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	if caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt")); err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("etcd CA: %v", err)
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + n.Address + ":2379"},
		TLS:         &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() })

	return cli
}

// roleClient is a Talos client of endpoint with a new certificate of roles.
func roleClient(t *testing.T, admin *client.Client, endpoint string, roles ...string) *client.Client {
	t.Helper()

	resp, err := admin.GenerateClientConfiguration(client.WithNode(etcdCtx(t), endpoint), &machine.GenerateClientConfigurationRequest{
		Roles: roles, CrtTtl: durationpb.New(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}

	m := resp.GetMessages()[0]

	cert, err := tls.X509KeyPair(m.GetCrt(), m.GetKey())
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(m.GetCa())

	cli, err := client.New(context.Background(), client.WithEndpoints(endpoint),
		client.WithTLSConfig(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() })

	return cli
}
