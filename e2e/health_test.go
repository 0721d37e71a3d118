package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strconv"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/wire"
)

const healthCIDR = "127.6.4.0/28"

// TestHealthProbeWithoutClientCertificate: a real node's apid answers
// grpc.health.v1 to a client without a certificate, SERVING once the
// node is ready (machined's health, followed by apid), and refuses the
// same client a MachineService call as Unauthenticated.
func TestHealthProbeWithoutClientCertificate(t *testing.T) {
	c := startClusterIn(t, "health", healthCIDR, 0)

	cfg, err := clientconfig.Open(c.ClientConfigPath())
	if err != nil {
		t.Fatal(err)
	}

	caPEM, err := base64.StdEncoding.DecodeString(cfg.Contexts[cfg.Context].CA)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	addr := c.Addresses()[0]
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: addr, MinVersion: tls.VersionTLS13}

	conn, err := grpc.NewClient(net.JoinHostPort(addr, strconv.Itoa(wire.APIDPort)), grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	health := healthpb.NewHealthClient(conn)

	for _, service := range []string{"", machine.MachineService_ServiceDesc.ServiceName} {
		waitUntil(t, "apid reports "+service+" SERVING", func() bool {
			resp, err := health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: service})

			return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
		})
	}

	_, err = machine.NewMachineServiceClient(conn).Version(ctx(t), &emptypb.Empty{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Version without a client certificate: %v, want Unauthenticated", err)
	}
}
