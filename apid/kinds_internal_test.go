package apid

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/tokens"
)

func TestMethodKinds(t *testing.T) {
	tests := []struct {
		method              string
		oneRequest, streams bool
	}{
		{machine.MachineService_Version_FullMethodName, true, false},
		{machine.MachineService_Logs_FullMethodName, true, true},
		{machine.MachineService_Events_FullMethodName, true, true},
		{machine.MachineService_EtcdRecover_FullMethodName, false, false},
		{tokens.TokenService_Create_FullMethodName, true, false},
		{certificates.CertificateService_Renew_FullMethodName, true, false},
		// Unknown methods may take a stream: never the one-request path.
		{"/machine.MachineService/NoSuchMethod", false, false},
		{"/no.such.Service/Version", false, false},
		{"/machine.MachineService.Version", false, false},
		{"", false, false},
	}

	for _, tt := range tests {
		if got := takesOneRequest(tt.method); got != tt.oneRequest {
			t.Errorf("takesOneRequest(%q) = %v, want %v", tt.method, got, tt.oneRequest)
		}

		if got := streamsReplies(tt.method); got != tt.streams {
			t.Errorf("streamsReplies(%q) = %v, want %v", tt.method, got, tt.streams)
		}
	}
}

// TestMethodTableIsTheRegistry: the table answers as protoregistry does,
// for every method it holds and for names it does not.
func TestMethodTableIsTheRegistry(t *testing.T) {
	lookup := func(method string) protoreflect.MethodDescriptor {
		svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
		if !ok {
			return nil
		}

		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			return nil
		}

		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			return nil
		}

		return sd.Methods().ByName(protoreflect.Name(name))
	}

	names := []string{"", "/", "//", "/machine.MachineService/", "/machine.MachineService/Version/x",
		"machine.MachineService/Version", "/machine.MachineService.Version", "/machine.Version/Version"}
	for name := range methodTable() {
		names = append(names, name)
	}

	if len(names) < 100 {
		t.Fatalf("only %d methods in the table", len(names))
	}

	for _, name := range names {
		if got, want := methodDescriptor(name), lookup(name); got != want {
			t.Errorf("%q: table %v, registry %v", name, got, want)
		}
	}
}
