package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/trustd"
)

// provenWorker is the address of the node that calls through the flood.
const provenWorker = "127.8.21.250"

// TestNodeGetsThroughAnAnonymousFlood: anonymous callers from more
// sources than it takes hold every anonymous slot of trustd, each
// connection having made a call (so none is evicted). A stranger's new
// connection is refused; a node's kept connection keeps answering, and a
// node's new connection (as after a restart of trustd or a renewal) gets
// through, proven by its node certificate. Then the same on apid, whose
// health service answers callers without a certificate, for an admin.
func TestNodeGetsThroughAnAnonymousFlood(t *testing.T) {
	needBinaries(t)

	c := localCluster(t, "proven", "127.8.21.0/24", 0)
	cp := c.Nodes[0]
	a := clusterAdmin(t, c)
	target := net.JoinHostPort(cp.Address, strconv.Itoa(wire.TrustdPort))

	cfg := workerJoinConfig(t, c, cp)
	cfg.Hostname, cfg.Source = provenWorker, provenWorker

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	joiner, err := join.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	node, err := joiner.Join(ctx)
	if err != nil {
		t.Fatal(err)
	}

	kept := nodeClient(t, cp.Address, node)
	if err := serials(ctx, kept); err != nil {
		t.Fatalf("the node's call before the flood: %v", err)
	}

	held := anonymousCallers(t, ctx, anonymous{
		target: target, roots: a.roots, server: cp.Address, sources: "127.8.22.%d",
		total: trustd.MaxConnections, perSource: trustd.MaxConnectionsPerSource,
	})
	t.Logf("anonymous callers hold %d connections (cap %d)", held, trustd.MaxConnections)

	if err := healthCheck(ctx, target, a.roots, cp.Address, "127.8.22.200"); err == nil {
		t.Fatal("a stranger's new connection was served with every anonymous slot held by callers")
	}

	if err := serials(ctx, kept); err != nil {
		t.Fatalf("the node's kept connection during the flood: %v", err)
	}

	start := time.Now()
	if err := serials(ctx, nodeClient(t, cp.Address, node)); err != nil {
		t.Fatalf("the node's new connection during the flood: %v", err)
	}

	t.Logf("a node's new connection answered in %v with the anonymous table full", time.Since(start).Round(time.Millisecond))
	stillHealthy(t, ctx, a, cp.Address, "trustd")

	// apid serves its health service to callers without a certificate:
	// they fill its anonymous table, and an operator's new connection still
	// gets through.
	apidTarget := net.JoinHostPort(cp.Address, strconv.Itoa(wire.APIDPort))
	held = anonymousCallers(t, ctx, anonymous{
		target: apidTarget, roots: a.roots, server: cp.Address, sources: "127.8.23.%d",
		total: apid.MaxConnections, perSource: apid.MaxConnectionsPerSource,
	})
	t.Logf("anonymous callers hold %d of apid's connections (cap %d)", held, apid.MaxConnections)

	if err := healthCheck(ctx, apidTarget, a.roots, cp.Address, "127.8.23.200"); err == nil {
		t.Fatal("a stranger's new connection to apid was served with every anonymous slot held by callers")
	}

	start = time.Now()
	if _, err := machine.NewMachineServiceClient(a.conn(t, cp.Address)).Version(ctx, &emptypb.Empty{}); err != nil {
		t.Fatalf("an admin's new connection to apid during the flood: %v", err)
	}

	t.Logf("an admin's new connection to apid answered in %v with the anonymous table full", time.Since(start).Round(time.Millisecond))
	stillHealthy(t, ctx, a, cp.Address, "apid", "trustd")
}

// stillHealthy fails the test unless machined reports every one of ids
// healthy and its health unchanged through floodProbes of its probes: a
// flood of anonymous callers must not make the node's own health checks
// fail (they would mark the service down, and roll back a version on
// trial).
func stillHealthy(t *testing.T, ctx context.Context, a admin, node string, ids ...string) {
	t.Helper()

	time.Sleep(floodProbes * 2 * time.Second) // the probes' period

	list, err := machine.NewMachineServiceClient(a.conn(t, node)).ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range list.GetMessages()[0].GetServices() {
		if !slices.Contains(ids, s.GetId()) {
			continue
		}

		h := s.GetHealth()
		if !h.GetHealthy() || h.GetLastChange().AsTime().After(time.Now().Add(-floodProbes*2*time.Second)) {
			t.Errorf("%s during the flood: healthy %v (%q), last change %s, want healthy all along: its health check must not compete with anonymous callers",
				s.GetId(), h.GetHealthy(), h.GetLastMessage(), h.GetLastChange().AsTime().Format(time.TimeOnly))
		}
	}
}

// floodProbes is how many of a service's health probes (one every 2 s)
// stillHealthy lets run under a flood.
const floodProbes = 3

// anonymous is a fill of a listener's anonymous table: total slots,
// perSource a source, from addresses made of sources (a format with one
// number).
type anonymous struct {
	target, server, sources string
	roots                   *x509.CertPool
	total, perSource        int
}

// nodeClient is a trustd client of the node that joined as res.
func nodeClient(t *testing.T, endpoint string, res *join.Result) *trustdclient.Client {
	t.Helper()

	pair, err := tls.X509KeyPair(res.CertPEM, res.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}

	c, err := trustdclient.New(trustdclient.Config{
		Endpoints:   []string{endpoint},
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
		AcceptedCAs: res.CAs.Pool, Source: provenWorker,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = c.Close() })

	return c
}

// serials asks trustd for the revocation list, as a worker's poll does.
func serials(ctx context.Context, c *trustdclient.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	_, err := c.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		_, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})

		return err
	})

	return err
}

// anonymousCallers fills a listener's anonymous table: from more sources
// than it takes, each of its per-source cap of connections without a
// client certificate makes a call (the health service's) and stays open.
// It returns how many were served.
func anonymousCallers(t *testing.T, ctx context.Context, fill anonymous) int {
	t.Helper()

	sources := fill.total/fill.perSource + 1

	var (
		served atomic.Int64
		wg     sync.WaitGroup
	)

	for s := range sources {
		wg.Add(1)

		go func() {
			defer wg.Done()

			for range fill.perSource {
				conn, err := anonymousConn(fill.target, fill.roots, fill.server, fmt.Sprintf(fill.sources, 1+s))
				if err != nil {
					continue
				}

				t.Cleanup(func() { _ = conn.Close() })

				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
				cancel()

				if err == nil {
					served.Add(1)
				}
			}
		}()
	}

	wg.Wait()

	if n := int(served.Load()); n < fill.total-fill.perSource {
		t.Fatalf("anonymous callers hold %d connections of %s, want its %d anonymous slots, nearly all", n, fill.target, fill.total)
	}

	return int(served.Load())
}

// anonymousConn is a connection to trustd without a client certificate.
func anonymousConn(target string, roots *x509.CertPool, server, source string) (*grpc.ClientConn, error) {
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: server, MinVersion: tls.VersionTLS13}

	return grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)), grpcopt.DialFrom(source))
}

// healthCheck calls trustd's health service once on a new anonymous
// connection from source.
func healthCheck(ctx context.Context, target string, roots *x509.CertPool, server, source string) error {
	conn, err := anonymousConn(target, roots, server, source)
	if err != nil {
		return err
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})

	return err
}
