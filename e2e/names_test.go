package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/localcluster"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// checkNamesProven runs on a cluster whose node gone was killed and has
// aged out of the member list: certificates carry their node's name; a
// worker, with its own certificate, cannot heartbeat a name it does not
// carry (a control plane's, or the one the killed worker left in the
// list); a token obtains neither a control plane's name nor another
// node's from another address, while the holder's own address keeps it.
func checkNamesProven(t *testing.T, c *localcluster.Cluster, worker, gone localcluster.Node) {
	cp := c.ControlPlanes()[0]
	wcfg := loadConfig(t, c.ConfigPath(worker))
	wcert := nodeKeyPair(t, c, worker)

	for _, n := range []localcluster.Node{worker, cp} {
		if cert := nodeKeyPair(t, c, n).Leaf; !slices.Contains(cert.DNSNames, n.Name) {
			t.Errorf("%s's certificate names %v, not its name", n.Name, cert.DNSNames)
		}
	}

	for _, claim := range []string{gone.Name, cp.Name} {
		var err error

		// The worker's own heartbeats share the address's spacing: one
		// that came just before is waited out.
		for range 5 {
			if err = workerHeartbeat(t, wcfg, cp, wcert, claim, worker.Address); status.Code(err) != codes.ResourceExhausted {
				break
			}

			time.Sleep(membershippkg.MinHeartbeatSpacing)
		}

		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "does not name hostname "+claim) {
			t.Errorf("%s's heartbeat as %s: %v, want PermissionDenied naming it", worker.Name, claim, err)
		}
	}

	// From the killed worker's address, free now, with the static token.
	for _, tt := range []struct{ name, want string }{
		{c.ControlPlanes()[1].Name, "a control plane of the cluster holds it"},
		{worker.Name, worker.Name + " is bound to the node at [" + worker.Address},
	} {
		err := requestName(t, wcfg, cp, gone.Address, tt.name)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("a token request for %s from %s: %v, want PermissionDenied: %q", tt.name, gone.Address, err, tt.want)
		}
	}

	// A node replaced at its own address joins with its name.
	if err := requestName(t, wcfg, cp, gone.Address, gone.Name); err != nil {
		t.Errorf("%s joining again from its own address: %v", gone.Name, err)
	}
}

// nodeKeyPair is the node's server certificate and key from its state
// directory.
func nodeKeyPair(t *testing.T, c *localcluster.Cluster, n localcluster.Node) tls.Certificate {
	t.Helper()

	crt, key := layout.Layout{State: c.StatePath(n)}.NodeCertificate("server")

	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}

	return pair
}

// nodeConn is a TLS connection to the control plane's trustd from source,
// presenting cert when it is not nil.
func nodeConn(t *testing.T, cfg *certs.MachineConfig, cp localcluster.Node, source string, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()

	tc := &tls.Config{RootCAs: cfg.AcceptedCAs().Pool(), ServerName: cp.Address, MinVersion: tls.VersionTLS13}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}

	conn, err := grpc.NewClient(net.JoinHostPort(cp.Address, strconv.Itoa(wire.TrustdPort)), grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return conn
}

// workerHeartbeat sends an entry claiming hostname at address, as the
// holder of cert.
func workerHeartbeat(t *testing.T, cfg *certs.MachineConfig, cp localcluster.Node, cert tls.Certificate, hostname, address string) error {
	_, err := membership.NewMembershipServiceClient(nodeConn(t, cfg, cp, address, &cert)).Heartbeat(etcdCtx(t), &membership.HeartbeatRequest{
		Member: &membership.Member{Hostname: hostname, Addresses: []string{address}, Interval: durationpb.New(time.Minute)},
	})

	return err
}

// requestName asks the control plane's trustd, from source with the config's
// token, for a certificate naming source and name.
func requestName(t *testing.T, cfg *certs.MachineConfig, cp localcluster.Node, source, name string) error {
	csr := trustdtest.CSR(t, ca.Ed25519, source, source, name)
	_, err := trustdtest.Call(etcdCtx(t), securityapi.NewSecurityServiceClient(nodeConn(t, cfg, cp, source, nil)), cfg.TrustdToken().Reveal(), csr)

	return err
}
