package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// trustdServer is the trustd binary run on its own, and its clients.
type trustdServer struct {
	proc *process
	conn *grpc.ClientConn
	addr string
	// cas and serverName are what a client checks trustd's certificate by.
	cas        *ca.AcceptedSet
	serverName string
	tok        token.Token
	csr        []byte
	// one is a client on one kept connection; fresh makes a new
	// connection per call, as a joining node does.
	one   securityapi.SecurityServiceClient
	fresh join.GRPCTransport
}

// startTrustd runs `trustd --config --state --listen` with a control-plane
// config of s's bundle that trusts the host clock, and waits until it
// signs.
func (r *run) startTrustd(ctx context.Context, s *issueSetup, ip string) (*trustdServer, error) {
	cfg, err := certs.GenerateMachineConfig(s.bundle, certs.NodeControlPlane, certs.ConfigOptions{
		ClusterName: "bench", Endpoint: ip, TrustHostClock: true, Hostname: "bench-trustd", ListenAddress: ip,
	}, time.Now())
	if err != nil {
		return nil, err
	}

	cfgPath := filepath.Join(s.dir, "trustd.yaml")
	if err = cfg.Save(cfgPath, false); err != nil {
		return nil, err
	}

	tok, err := token.Parse(s.bundle.TrustdInfo.Token)
	if err != nil {
		return nil, err
	}

	addr := net.JoinHostPort(ip, strconv.Itoa(wire.TrustdPort))
	td := &trustdServer{addr: addr, tok: tok, csr: s.csrPEM, fresh: join.GRPCTransport{CAs: cfg.AcceptedCAs(), Source: IssueSource}}

	td.proc, err = r.start("trustd", filepath.Join(s.dir, "trustd.log"), filepath.Join(r.cfg.BinDir, "trustd"),
		"--config", cfgPath, "--state", filepath.Join(s.dir, "trustd-state"), "--listen", addr)
	if err != nil {
		return nil, err
	}

	if err = td.proc.waitListening(ctx, addr); err != nil {
		return nil, errors.Join(err, td.proc.stop())
	}

	if err = td.dial(cfg.AcceptedCAs(), ip); err != nil {
		return nil, errors.Join(err, td.close())
	}

	// The time gate opens just after trustd starts: wait for a signature.
	if err = untilOK(ctx, td.callOne, td.proc); err != nil {
		return nil, errors.Join(err, td.close())
	}

	return td, nil
}

func (t *trustdServer) dial(cas *ca.AcceptedSet, serverName string) error {
	t.cas, t.serverName = cas, serverName
	creds := credentials.NewTLS(&tls.Config{RootCAs: cas.Pool(), ServerName: serverName, MinVersion: tls.VersionTLS13})

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(IssueSource)}}

	conn, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		return err
	}

	t.conn, t.one = conn, securityapi.NewSecurityServiceClient(conn)

	return nil
}

// close closes the client and stops the server.
func (t *trustdServer) close() error {
	if t.conn != nil {
		t.conn.Close() //nolint:errcheck // a client connection; the server's stop is what counts
	}

	return t.proc.stop()
}

func (t *trustdServer) callOne(ctx context.Context) error {
	ctx = metadata.AppendToOutgoingContext(ctx, wire.MetadataToken, t.tok.Reveal())

	resp, err := t.one.Certificate(ctx, &securityapi.CertificateRequest{Csr: t.csr})
	if err == nil && len(resp.GetCrt()) == 0 {
		err = errors.New("trustd answered without a certificate")
	}

	return err
}

func (t *trustdServer) callNew(ctx context.Context) error {
	_, crt, err := t.fresh.Certificate(ctx, t.addr, t.tok, t.csr)
	if err == nil && len(crt) == 0 {
		err = errors.New("trustd answered without a certificate")
	}

	return err
}
