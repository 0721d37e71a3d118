package apid_test

import (
	"context"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
)

// dialNoCertificate connects to apid verifying its certificate but
// presenting none, as a load balancer's probe does.
func dialNoCertificate(t *testing.T, p *apidtest.PKI, addr string) *grpc.ClientConn {
	t.Helper()

	cfg := p.ClientTLS(t, apidtest.Pair{})
	cfg.Certificates, cfg.GetClientCertificate = nil, nil

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	return conn
}

// waitHealth watches service until it reports want.
func waitHealth(ctx context.Context, t *testing.T, c healthpb.HealthClient, service string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()

	// Polled as a probe does: apid serves Check, not Watch, to callers.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()

	for {
		resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err == nil && resp.GetStatus() == want {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("Check(%q) waiting for %v: %v %v", service, want, resp, err)
		case <-tick.C:
		}
	}
}

// TestHealthWithoutClientCertificate: a client without a certificate gets
// apid's health, which follows machined's: "" SERVING while machined
// answers, MachineService as machined reports it.
func TestHealthWithoutClientCertificate(t *testing.T) {
	machined := health.NewServer()
	machined.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Register: func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, machined)
	}})

	c := healthpb.NewHealthClient(dialNoCertificate(t, p, node.Addr))
	ctx := testCtx(t)
	svc := machine.MachineService_ServiceDesc.ServiceName

	waitHealth(ctx, t, c, "", healthpb.HealthCheckResponse_SERVING)
	waitHealth(ctx, t, c, svc, healthpb.HealthCheckResponse_NOT_SERVING)

	machined.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	waitHealth(ctx, t, c, svc, healthpb.HealthCheckResponse_SERVING)

	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v", resp, err)
	}

	// Watch would hold a stream open outside the stream caps.
	stream, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("health Watch without a certificate: %v, want Unimplemented", err)
	}

	// machined gone: apid says so.
	node.Backend.Stop()
	waitHealth(ctx, t, c, "", healthpb.HealthCheckResponse_NOT_SERVING)
	waitHealth(ctx, t, c, svc, healthpb.HealthCheckResponse_NOT_SERVING)
}

// TestNoCertificateRefusedButHealth: without a client certificate every
// method apid knows a rule for, and any other, is refused Unauthenticated
// (and logged); the handshake itself is no longer where it is refused.
func TestNoCertificateRefusedButHealth(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger()})
	conn := dialNoCertificate(t, p, node.Addr)

	methods := []string{"/machine.MachineService/NoSuchMethod", "/no.Such/Service", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"}
	for m := range authz.DefaultRules() {
		methods = append(methods, m)
	}

	for _, s := range machine.MachineService_ServiceDesc.Streams {
		methods = append(methods, "/"+machine.MachineService_ServiceDesc.ServiceName+"/"+s.StreamName)
	}

	for _, m := range machine.MachineService_ServiceDesc.Methods {
		methods = append(methods, "/"+machine.MachineService_ServiceDesc.ServiceName+"/"+m.MethodName)
	}

	for _, m := range methods {
		if err := callStream(testCtx(t), conn, m); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s without a client certificate: %v, want Unauthenticated", m, err)
		}
	}

	node.Stop()

	if len(sink.Find(t, "call without a client certificate refused")) != 1 || len(sink.Find(t, "tls handshakes refused")) != 1 {
		t.Fatalf("refusals not logged once in full and once summarized: %v", sink.Records(t))
	}
}

// The health service answers for its node only: node/nodes are refused.
func TestHealthRefusesRouting(t *testing.T) {
	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})
	c := healthpb.NewHealthClient(dialNoCertificate(t, p, node.Addr))

	for _, key := range []string{wire.MetadataNode, wire.MetadataNodes} {
		ctx := metadata.AppendToOutgoingContext(testCtx(t), key, testIP)
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Check with %s: %v, want InvalidArgument", key, err)
		}
	}
}

// callStream calls any method as a stream with one empty message: apid
// serves every routed method as a stream.
func callStream(ctx context.Context, conn *grpc.ClientConn, method string) error {
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return err
	}

	if err := st.SendMsg(&emptypb.Empty{}); err != nil {
		return st.RecvMsg(&emptypb.Empty{})
	}

	_ = st.CloseSend()

	return st.RecvMsg(&emptypb.Empty{})
}
