package e2e

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/siderolabs/talos/pkg/machinery/api/cluster" // the Talos services a node is asked for
	_ "github.com/siderolabs/talos/pkg/machinery/api/inspect"
	_ "github.com/siderolabs/talos/pkg/machinery/api/storage"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// walkedServices are the services a Talos client may ask an Aegis node
// for: those machined serves and the Talos services it does not have.
var walkedServices = []protoreflect.FullName{
	"machine.MachineService",
	"cosi.resource.State",
	"time.TimeService",
	"aegis.tokens.TokenService",
	"aegis.certificates.CertificateService",
	"cluster.ClusterService",
	"inspect.InspectService",
	"storage.StorageService",
}

// disruptive methods would take the node away or change it for the rest
// of the walk if they worked; they are called as os:reader, whose refusal
// (PermissionDenied from authz, naming the method) is their answer here.
// Their behaviour is tested where they are implemented.
var disruptive = []string{
	"/machine.MachineService/Reboot", "/machine.MachineService/Shutdown", "/machine.MachineService/Reset",
	"/machine.MachineService/Upgrade", "/machine.MachineService/Rollback", "/machine.MachineService/EtcdLeaveCluster",
	"/machine.MachineService/ApplyConfiguration", "/machine.MachineService/EtcdForfeitLeadership",
}

// documented are the codes whose answers say what is wrong with the call
// or why the node cannot do it: a caller can act on them.
var documented = []codes.Code{
	codes.OK, codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.PermissionDenied,
	codes.AlreadyExists, codes.OutOfRange,
}

// methodCallTimeout bounds each call: every method answers at once or
// starts streaming; one that does neither hangs.
const methodCallTimeout = 15 * time.Second

// TestEveryMethodAnswers calls every method of every service a Talos client
// may ask for, with an empty request, on a control plane and a worker
// through the control plane's apid: each must answer within the deadline
// with a result, a documented error, or Unimplemented naming the method;
// never "unknown service", never Internal or Unknown.
func TestEveryMethodAnswers(t *testing.T) {
	c := etcdCluster(t, "walk", "127.9.19.0/24", 1, 1, false)
	admin := talosClient(t, c.ClientConfigPath())
	cp := c.ControlPlanes()[0]
	reader := roleClient(t, admin, cp.Address, "os:reader")

	var called int

	for _, svc := range walkedServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(svc)
		if err != nil {
			t.Fatalf("service %s not registered: %v", svc, err)
		}

		methods := d.(protoreflect.ServiceDescriptor).Methods()

		for i := range methods.Len() {
			md := methods.Get(i)
			full := "/" + string(svc) + "/" + string(md.Name())

			cli := admin
			if slices.Contains(disruptive, full) {
				cli = reader
			}

			for _, n := range c.Nodes {
				code, msg := callEmpty(client.WithNode(context.Background(), n.Address), cli.Conn(), md, full)
				called++

				if testing.Verbose() {
					t.Logf("%s on %s: %s %.100s", full, n.Name, code, msg)
				}

				if problem := judge(code, msg, md); problem != "" {
					t.Errorf("%s on %s: %s: %s: %s", full, n.Name, problem, code, msg)
				}
			}
		}
	}

	t.Logf("%d calls answered", called)
}

// judge says what is wrong with an answer, or "".
func judge(code codes.Code, msg string, md protoreflect.MethodDescriptor) string {
	switch {
	case strings.Contains(msg, "unknown service"):
		return "unknown service"
	case code == codes.DeadlineExceeded:
		return "hangs"
	case code == codes.Unimplemented && !strings.Contains(msg, string(md.Name())):
		return "Unimplemented without naming the method"
	case code == codes.Unimplemented:
		return ""
	case !slices.Contains(documented, code):
		return "not a result or a documented error"
	case code != codes.OK && strings.TrimSpace(msg) == "":
		return "an error without a message"
	}

	return ""
}

// callEmpty calls method with an empty request (none for a client stream)
// and reads the first reply: a stream that sends one has answered.
func callEmpty(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor, full string) (codes.Code, string) {
	ctx, cancel := context.WithTimeout(ctx, methodCallTimeout)
	defer cancel()

	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, full)
	if err != nil {
		return status.Code(err), err.Error()
	}

	if !md.IsStreamingClient() {
		if err := stream.SendMsg(dynamicpb.NewMessage(md.Input())); err != nil && !errors.Is(err, io.EOF) {
			return status.Code(err), err.Error()
		}
	}

	if err := stream.CloseSend(); err != nil {
		return status.Code(err), err.Error()
	}

	err = stream.RecvMsg(dynamicpb.NewMessage(md.Output()))
	if err == nil || errors.Is(err, io.EOF) {
		return codes.OK, ""
	}

	st := status.Convert(err)

	return st.Code(), st.Message()
}
