// Package recovertest checks that a gRPC server built by an Aegis
// constructor survives a panicking handler: it registers a test-only
// service whose one method panics and checks the answer, the log record and
// the next call.
package recovertest

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/grpcrecover"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Secret is in the panic value; it must reach the log and never the caller.
const Secret = "secret detail of the panic"

type service struct {
	testpb.UnimplementedTestServiceServer
}

// EmptyCall panics, as a handler with a bug would.
func (service) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	panic(Secret)
}

// UnaryCall answers, to show the server still serves.
func (service) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

// Register adds the test-only service to s, before s serves.
func Register(s *grpc.Server) {
	testpb.RegisterTestServiceServer(s, service{})
}

var referenceRe = regexp.MustCompile(`\(ref ([0-9a-f]+)\)`)

// Check calls the panicking method through conn (ctx carries whatever the
// server needs to let the call through) and checks: Internal with a
// reference and nothing of the panic; a log record (read by logs) with the
// same reference, the panic and its stack; and a next call served.
func Check(ctx context.Context, t *testing.T, conn grpc.ClientConnInterface, logs func() string) {
	t.Helper()

	client := testpb.NewTestServiceClient(conn)

	_, err := client.EmptyCall(ctx, &testpb.Empty{})

	st, _ := status.FromError(err)
	if st.Code() != codes.Internal || strings.Contains(st.Message(), Secret) {
		t.Fatalf("panic answered %v, want Internal without its detail", err)
	}

	m := referenceRe.FindStringSubmatch(st.Message())
	if m == nil {
		t.Fatalf("answer %q carries no reference", st.Message())
	}

	log := logs()
	if !recorded(log, m[1]) {
		t.Fatalf("no log record of the panic with reference %s, its detail and stack:\n%s", m[1], log)
	}

	if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("call after the panic: %v", err)
	}
}

func recorded(log, ref string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, ref) && strings.Contains(line, Secret) &&
			strings.Contains(line, logkey.Stack) && strings.Contains(line, "goroutine") &&
			strings.Contains(line, grpcrecover.MsgPanic) {
			return true
		}
	}

	return false
}
