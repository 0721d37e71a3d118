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
	"time"

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

// apidLoads compares Version through the control plane's apid with
// Version straight to its machined, one call after the other and with
// parallel callers, then times new mTLS connections to apid.
func (r *run) apidLoads(ctx context.Context, e *clusterEnv) error {
	direct, conn, err := directClient(e)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a client connection

	via := versionCall(e.cli.MachineClient, nil)

	p := r.plan
	r.logf("apid: %d Version calls per case, then %d with %d callers", p.APIDCalls, p.APIDParallelCalls, p.APIDWorkers)

	lat, err := r.directVsAPID(ctx, e, direct, via)
	if err != nil {
		return err
	}

	a := &APIDCalls{Direct: lat[0], Via: lat[1], Workers: p.APIDWorkers}

	if a.DirectRate, a.ViaRate, err = r.parallelRates(ctx, direct, via); err != nil {
		return err
	}

	if a.Handshake, err = r.handshakes(ctx, e); err != nil {
		return err
	}

	a.ConnRate = a.Handshake.PerSecond()
	r.res.APID = a

	return nil
}

// directVsAPID times Version straight to the control plane's machined
// and through its apid, one call after the other, interleaved.
func (r *run) directVsAPID(ctx context.Context, e *clusterEnv, direct, via func(context.Context) error) ([2]Case, error) {
	p := r.plan
	self, machined, apid := os.Getpid(), e.cpProcs["machined"], e.cpProcs["apid"]

	lat, err := compare(ctx, p.Rounds, p.Budget,
		variant{"direct", p.APIDCalls, direct, [][]int{{machined, self}, {machined}}},
		variant{"through apid", p.APIDCalls, via, [][]int{{apid, machined, self}, {apid}}})
	if err != nil {
		return [2]Case{}, err
	}

	return [2]Case{lat[0].Case(), lat[1].Case()}, nil
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

// parallelRates runs the two calls with APIDWorkers callers each, in
// alternating rounds, and returns their calls per second.
func (r *run) parallelRates(ctx context.Context, direct, via func(context.Context) error) (float64, float64, error) {
	p := r.plan

	var (
		counts   [2]int
		elapsed  [2]time.Duration
		perRound = max(1, p.APIDParallelCalls/p.Rounds)
	)

	for range p.Rounds {
		for i, call := range []func(context.Context) error{direct, via} {
			n, d, err := parallel(ctx, p.APIDWorkers, perRound, p.Budget/time.Duration(p.Rounds), call)
			if err != nil {
				return 0, 0, err
			}

			counts[i], elapsed[i] = counts[i]+n, elapsed[i]+d
		}
	}

	return Rate(counts[0], elapsed[0]), Rate(counts[1], elapsed[1]), nil
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

// clientTLS is the cluster's admin credentials as a TLS client config.
func clientTLS(e *clusterEnv) (*tls.Config, error) {
	cc, err := certs.LoadClientConfig(e.c.ClientConfigPath())
	if err != nil {
		return nil, err
	}

	_, cur, err := cc.Current()
	if err != nil {
		return nil, err
	}

	pair, err := tls.X509KeyPair(cur.Crt, cur.Key)
	if err != nil {
		return nil, err
	}

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cur.CA) {
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
