package node

import (
	"context"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
)

type callLogMachine struct {
	machine.UnimplementedMachineServiceServer
}

func (callLogMachine) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	return &machine.VersionResponse{}, nil
}

func (callLogMachine) Logs(*machine.LogsRequest, grpc.ServerStreamingServer[common.Data]) error {
	return status.Error(codes.NotFound, `log "SECRET-ID" was not registered`)
}

func (callLogMachine) ApplyConfiguration(context.Context, *machine.ApplyConfigurationRequest) (*machine.ApplyConfigurationResponse, error) {
	return &machine.ApplyConfigurationResponse{}, nil
}

// TestCallLog: every call machined.sock serves, unary or stream, allowed
// or refused, leaves one line in machined's log with the method, the
// caller apid names and the code; never what the request or the answer
// held; the health service's probes leave none.
func TestCallLog(t *testing.T) {
	var logs logtest.Sink

	srv := newAPIServer(logs.Logger(), nil)
	machine.RegisterMachineServiceServer(srv, callLogMachine{})
	healthpb.RegisterHealthServer(srv, newHealth())

	conn := serveBufconn(t, srv)
	c := machine.NewMachineServiceClient(conn)

	caller := authz.Caller{Serial: "1a2b", Subject: "O=os:admin,CN=alice"}
	as := func(r role.Role) context.Context {
		md := metadata.Pairs(wire.MetadataRole, string(r))
		authz.SetCallerMetadata(md, caller)

		return metadata.NewOutgoingContext(t.Context(), md)
	}

	if _, err := c.Version(as(role.Reader), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}

	if _, err := c.ApplyConfiguration(as(role.Reader), &machine.ApplyConfigurationRequest{Data: []byte("SECRET-CONFIG")}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader applies a config: %v", err)
	}

	stream, err := c.Logs(as(role.Reader), &machine.LogsRequest{Id: "SECRET-ID"})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.NotFound {
		t.Fatalf("Logs: %v", err)
	}

	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	for _, want := range []struct{ method, code, level string }{
		{"Version", "OK", "INFO"}, {"ApplyConfiguration", "PermissionDenied", "WARN"}, {"Logs", "NotFound", "INFO"},
	} {
		r := logs.First(t, MsgCall, logkey.Method, want.method)
		if r == nil {
			t.Fatalf("no line for %s:\n%s", want.method, logs.String())
		}

		for k, v := range map[string]any{
			logkey.Service: "machine.MachineService", logkey.Code: want.code, "level": want.level,
			logkey.CallerSerial: caller.Serial, logkey.CallerSubject: caller.Subject,
		} {
			if r[k] != v {
				t.Errorf("%s: %s = %v, want %v", want.method, k, r[k], v)
			}
		}

		if d, _ := r[logkey.Duration].(string); d == "" || strings.Trim(d, "0123456789.") != "" {
			t.Errorf("%s: no duration: %v", want.method, r)
		}
	}

	if n := len(logs.Find(t, MsgCall)); n != 3 {
		t.Errorf("%d call lines, want 3 (none for the health probe):\n%s", n, logs.String())
	}

	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("what a call carried reached the log:\n%s", logs.String())
	}
}

// TestCallLogIsImmediate: the line of a call is written before its caller
// has the answer, so a follow of machined's log sees it at once (Talos's
// LogsSuite gives it 200 ms).
func TestCallLogIsImmediate(t *testing.T) {
	var logs logtest.Sink

	srv := newAPIServer(logs.Logger(), nil)
	machine.RegisterMachineServiceServer(srv, callLogMachine{})

	c := machine.NewMachineServiceClient(serveBufconn(t, srv))
	ctx := metadata.NewOutgoingContext(t.Context(), metadata.Pairs(wire.MetadataRole, string(role.Reader)))

	for i := range 5 {
		if _, err := c.Version(ctx, &emptypb.Empty{}); err != nil {
			t.Fatal(err)
		}

		if n := len(logs.Find(t, MsgCall, logkey.Method, "Version")); n != i+1 {
			t.Fatalf("after %d calls, %d lines", i+1, n)
		}
	}
}
