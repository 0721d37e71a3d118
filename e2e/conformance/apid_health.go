package conformance

import (
	"context"
	"crypto/tls"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// healthCases: a client without a certificate completes the handshake so
// that it can probe apid's grpc.health.v1, and is refused everything else.
func healthCases() []*Case {
	return []*Case{
		{
			Group: "apid", Name: "health probe without a client certificate", Expected: "SERVING",
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return probeHealth(ctx, e.Target, noCertificate(e), r)
			},
		},
		{
			Group: "apid", Name: "no client certificate: every MachineService method", Expected: codes.Unauthenticated.String(),
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return everyMethod(ctx, e.Target, noCertificate(e), r)
			},
		},
	}
}

func noCertificate(e *Env) *tls.Config { return e.clientTLS(e.Target, Identity{}) }

func probeHealth(ctx context.Context, node string, cfg *tls.Config, r *Report) string {
	conn, err := dialTLS(apidAddr(node), cfg)
	if err != nil {
		r.Problemf("dial: %v", err)

		return err.Error()
	}
	defer conn.Close() //nolint:errcheck // one call

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: machine.MachineService_ServiceDesc.ServiceName})
	if err != nil {
		return status.Code(err).String()
	}

	return resp.GetStatus().String()
}

// everyMethod calls each MachineService method with an empty message and
// returns the one code they all ended with, or reports the others.
func everyMethod(ctx context.Context, node string, cfg *tls.Config, r *Report) string {
	conn, err := dialTLS(apidAddr(node), cfg)
	if err != nil {
		r.Problemf("dial: %v", err)

		return err.Error()
	}
	defer conn.Close() //nolint:errcheck // the case's calls

	desc := machine.MachineService_ServiceDesc
	methods := make([]string, 0, len(desc.Methods)+len(desc.Streams))

	for _, m := range desc.Methods {
		methods = append(methods, "/"+desc.ServiceName+"/"+m.MethodName)
	}

	for _, s := range desc.Streams {
		methods = append(methods, "/"+desc.ServiceName+"/"+s.StreamName)
	}

	got := codes.Unauthenticated
	for _, m := range methods {
		if c := callAny(ctx, conn, m); c != codes.Unauthenticated {
			r.Problemf("%s ended %s", m, c)
			got = c
		}
	}

	return got.String()
}

// callAny calls method as a stream with one empty message, which apid
// routes like any call.
func callAny(ctx context.Context, conn *grpc.ClientConn, method string) codes.Code {
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return status.Code(err)
	}

	if err = st.SendMsg(&emptypb.Empty{}); err == nil {
		_ = st.CloseSend()
	}

	return status.Code(st.RecvMsg(&emptypb.Empty{}))
}

// withheldCase is a client whose certificate is not of a CA apid accepts:
// apid's certificate request names the accepted CAs, so the client sends
// no certificate, completes the handshake like any client without one,
// and is refused the call Unauthenticated, never reaching machined.
func withheldCase(name string, cfg func(e *Env) *tls.Config) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: codes.Unauthenticated.String(),
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return withheldCertificate(ctx, e.Target, cfg(e), r)
		},
	}
}

func withheldCertificate(ctx context.Context, node string, cfg *tls.Config, r *Report) string {
	callCtx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()

	code := callVersion(callCtx, node, cfg)
	if code != codes.Unauthenticated {
		r.Problemf("Version ended %s, want Unauthenticated", code)
	}

	return code.String()
}
