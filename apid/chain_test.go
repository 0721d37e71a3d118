package apid

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type panicStream struct {
	grpc.ServerStream
}

func (panicStream) Context() context.Context { return context.Background() }

// A panic in a handler becomes Internal with nothing of its cause sent,
// and one log record with the stack.
func TestPanicIsRecovered(t *testing.T) {
	var buf bytes.Buffer

	s := &Server{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	_, stream := s.interceptors(nil)

	err := stream[0](nil, panicStream{}, &grpc.StreamServerInfo{FullMethod: machine.MachineService_Version_FullMethodName},
		func(any, grpc.ServerStream) error { panic("secret detail") })

	st, _ := status.FromError(err)
	if st.Code() != codes.Internal || strings.Contains(st.Message(), "secret") || !strings.Contains(st.Message(), "(ref ") {
		t.Fatalf("panic answered %v", err)
	}

	if !strings.Contains(buf.String(), "secret detail") || !strings.Contains(buf.String(), "stack") {
		t.Fatalf("panic not logged: %s", buf.String())
	}
}
