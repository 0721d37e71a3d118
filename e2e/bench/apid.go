package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/layout"
)

// apidLoads compares Version straight to the control plane's machined,
// through the bare transparent proxy in front of it (apid's floor) and
// through its apid: one call after the other, then with parallel callers,
// interleaved; then times new mTLS connections to apid.
func (r *run) apidLoads(ctx context.Context, e *clusterEnv) error {
	direct, conn, err := directClient(e)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a client connection

	bp, err := r.startBareProxy(ctx, e)
	if err != nil {
		return fmt.Errorf("bare proxy: %w", err)
	}
	defer bp.close() //nolint:errcheck // also on the run's clean-up list, which reports

	hops := apidHops{
		{"direct", direct, e.cpProcs["machined"]},
		{"through the bare proxy", bp.call, bp.proc.PID()},
		{"through apid", versionCall(e.cli.MachineClient, nil), e.cpProcs["apid"]},
	}

	p := r.plan
	r.logf("apid: %d Version calls per case, then %d with %d callers", p.APIDCalls, p.APIDParallelCalls, p.APIDWorkers)

	lat, err := r.compareHops(ctx, e, hops)
	if err != nil {
		return err
	}

	a := &APIDCalls{Direct: lat[0], Proxy: lat[1], Via: lat[2], Workers: p.APIDWorkers}

	par, err := interleaveParallel(ctx, p, p.APIDParallelCalls, hops.parallel(e, p.APIDWorkers))
	if err != nil {
		return err
	}

	a.DirectParallel, a.ProxyParallel, a.ViaParallel = par[0], par[1], par[2]

	if a.Handshake, err = r.handshakes(ctx, e); err != nil {
		return err
	}

	a.ConnRate = a.Handshake.PerSecond()
	r.res.APID = a

	return nil
}

// apidHop is one way to call Version on the control plane, and the process
// in the way: machined itself for the direct call, else the proxy.
type apidHop struct {
	name string
	call func(context.Context) error
	pid  int
}

type apidHops []apidHop

// meters charges a hop's call with the harness's, the hop's and machined's
// CPU time, then the hop's alone.
func (h apidHop) meters(e *clusterEnv) [][]int {
	all := []int{os.Getpid(), e.cpProcs["machined"]}
	if h.pid != e.cpProcs["machined"] {
		all = append(all, h.pid)
	}

	return [][]int{all, {h.pid}}
}

// compareHops times Version by each hop, one call after the other,
// interleaved.
func (r *run) compareHops(ctx context.Context, e *clusterEnv, hops apidHops) ([]Case, error) {
	p := r.plan
	vs := make([]variant, len(hops))

	for i, h := range hops {
		vs[i] = variant{h.name, p.APIDCalls, h.call, h.meters(e)}
	}

	lat, err := compare(ctx, p.Rounds, p.Budget, vs...)
	if err != nil {
		return nil, err
	}

	out := make([]Case, len(lat))
	for i, l := range lat {
		out[i] = l.Case()
	}

	return out, nil
}

// parallel is the hops' cases with callers callers on one connection each.
func (hops apidHops) parallel(e *clusterEnv, callers int) []saturatedCase {
	out := make([]saturatedCase, len(hops))
	for i, h := range hops {
		out[i] = saturatedCase{server: h.name, callers: callers, pid: h.pid, call: h.call, all: h.meters(e)[0]}
	}

	return out
}

// directVsAPID times Version straight to the control plane's machined
// and through its apid, one call after the other, interleaved.
func (r *run) directVsAPID(ctx context.Context, e *clusterEnv, direct, via func(context.Context) error) ([2]Case, error) {
	lat, err := r.compareHops(ctx, e, apidHops{
		{"direct", direct, e.cpProcs["machined"]},
		{"through apid", via, e.cpProcs["apid"]},
	})
	if err != nil {
		return [2]Case{}, err
	}

	return [2]Case{lat[0], lat[1]}, nil
}

// directClient calls Version straight to the control plane's machined
// socket, as apid does; close the connection when done.
func directClient(e *clusterEnv) (func(context.Context) error, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+machinedSocket(e), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}

	return versionCall(machine.NewMachineServiceClient(conn), metadata.Pairs(wire.MetadataRole, string(role.Admin))), conn, nil
}

// machinedSocket is where the control plane's apid forwards calls.
func machinedSocket(e *clusterEnv) string {
	return layout.Layout{State: e.c.StatePath(e.cp)}.MachinedSocket()
}

// versionCall calls Version with md (nil: none) and checks the reply.
func versionCall(mc machine.MachineServiceClient, md metadata.MD) func(context.Context) error {
	return func(ctx context.Context) error {
		if md != nil {
			ctx = metadata.NewOutgoingContext(ctx, md)
		}

		resp, err := mc.Version(ctx, &emptypb.Empty{})
		if err == nil && len(resp.GetMessages()) != 1 {
			err = fmt.Errorf("%d replies to Version, want 1", len(resp.GetMessages()))
		}

		return err
	}
}

// handshakes times new TLS connections to the control plane's apid with
// the admin client certificate, each up to apid's first HTTP/2 frame,
// which it sends only once it has accepted the client.
func (r *run) handshakes(ctx context.Context, e *clusterEnv) (Case, error) {
	cfg, err := clientTLS(e)
	if err != nil {
		return Case{}, err
	}

	addr := net.JoinHostPort(e.cp.Address, strconv.Itoa(wire.APIDPort))
	r.logf("apid: %d new mTLS connections", r.plan.Handshakes)

	lat, err := compare(ctx, 1, r.plan.Budget, variant{"handshake", r.plan.Handshakes, func(ctx context.Context) error {
		return handshake(ctx, addr, cfg)
	}, [][]int{{e.cpProcs["apid"], os.Getpid()}, {e.cpProcs["apid"]}}})
	if err != nil {
		return Case{}, err
	}

	return lat[0].Case(), nil
}

// adminCredentials are the cluster's admin certificate and the CA
// certificates (PEM) of its client config.
func adminCredentials(e *clusterEnv) (tls.Certificate, []byte, error) {
	cc, err := certs.LoadClientConfig(e.c.ClientConfigPath())
	if err != nil {
		return tls.Certificate{}, nil, err
	}

	_, cur, err := cc.Current()
	if err != nil {
		return tls.Certificate{}, nil, err
	}

	pair, err := tls.X509KeyPair(cur.Crt, cur.Key)

	return pair, cur.CA, err
}

// clientTLS is the cluster's admin credentials as a TLS client config.
func clientTLS(e *clusterEnv) (*tls.Config, error) {
	pair, caPEM, err := adminCredentials(e)
	if err != nil {
		return nil, err
	}

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("bench: client config holds no CA")
	}

	return &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: e.cp.Address,
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
	}, nil
}

// http2Preface opens an HTTP/2 connection.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

func handshake(ctx context.Context, addr string, cfg *tls.Config) error {
	d := tls.Dialer{Config: cfg}

	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // done with it either way

	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline) //nolint:errcheck // a failed read reports it
	}

	if _, err = conn.Write(http2Preface); err != nil {
		return err
	}

	_, err = io.ReadFull(conn, make([]byte, 9)) // a frame header

	return err
}
