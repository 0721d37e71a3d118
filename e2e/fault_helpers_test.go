package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// faultTimeout bounds every wait of the fault tests: generous, for a busy
// machine, and never a substitute for a condition.
const faultTimeout = 4 * time.Minute

// localCluster creates a cluster of one control plane and one worker in
// cidr (127.8.x.0/24) with node certificates of ttl (zero: the default),
// destroyed when the test ends.
func localCluster(t *testing.T, name, cidr string, ttl time.Duration) *localcluster.Cluster {
	t.Helper()

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: name, ControlPlanes: 1, Workers: 1, CIDR: netip.MustParsePrefix(cidr),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: faultTimeout, NodeCertTTL: ttl,
		Runtime: certs.RuntimeProcess, // not about containers: the quicker runtime
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, c.Tail(n, 40))
			}
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	return c
}

// admin is a cluster's admin credentials: its CA pool and client certificate.
type admin struct {
	roots *x509.CertPool
	cert  tls.Certificate
}

func clusterAdmin(t *testing.T, c *localcluster.Cluster) admin {
	t.Helper()

	cfg, err := certs.LoadClientConfig(c.ClientConfigPath())
	if err != nil {
		t.Fatal(err)
	}

	_, cc, err := cfg.Current()
	if err != nil {
		t.Fatal(err)
	}

	set, err := ca.ParseAcceptedSet(cc.CA, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	pair, err := tls.X509KeyPair(cc.Crt, cc.Key)
	if err != nil {
		t.Fatal(err)
	}

	return admin{roots: set.Pool(), cert: pair}
}

// tlsFor is the admin's client config for node.
func (a admin) tlsFor(node string) *tls.Config {
	return &tls.Config{RootCAs: a.roots, ServerName: node, Certificates: []tls.Certificate{a.cert}, MinVersion: tls.VersionTLS13}
}

// conn is a gRPC connection to node's apid as admin, closed when the test ends.
func (a admin) conn(t *testing.T, node string) *grpc.ClientConn {
	t.Helper()

	conn, err := grpc.NewClient(net.JoinHostPort(node, strconv.Itoa(wire.APIDPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(a.tlsFor(node))))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return conn
}

// servedCertificate returns the server certificate node's apid presents.
func (a admin) servedCertificate(node string) (*x509.Certificate, error) {
	d := tls.Dialer{Config: a.tlsFor(node), NetDialer: &net.Dialer{Timeout: 10 * time.Second}}

	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(node, strconv.Itoa(wire.APIDPort)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// logRecords reads a JSON log file into records; lines that are not JSON
// are skipped.
func logRecords(t *testing.T, path string) []map[string]any {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	var out []map[string]any

	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)

	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}

	return out
}

// waitFor polls check until it succeeds or faultTimeout passes.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()

	deadline := time.Now().Add(faultTimeout)

	for {
		err := check()
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, faultTimeout, err)
		}

		time.Sleep(250 * time.Millisecond)
	}
}
