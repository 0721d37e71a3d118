package apid_test

import (
	"context"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
)

// A call forwarded to another node is recorded there under the client
// that made it, not the forwarding node: in that node's request log line
// (with the forwarding node in forwarded_by) and in the caller metadata
// its machined receives. A caller the client itself names is dropped on a
// direct call's way on, and refused from anyone but another node's apid.
func TestForwardedCallNamesTheOriginalCaller(t *testing.T) {
	p := apidtest.NewPKI(t)

	var logs logtest.Sink

	a := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "node-a"})
	b := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Hostname: "node-b", Logger: logs.Logger()})

	admin := p.Client(t, role.Admin)
	want := authz.CallerOfCertificate(admin.Cert)
	c := apidtest.TalosClient(t, a.Addr, p.ClientTLS(t, admin))

	if _, err := c.Version(client.WithNode(testCtx(t), b.IP)); err != nil {
		t.Fatalf("forwarded Version: %v", err)
	}

	calls := b.Backend.CallsTo("/machine.MachineService/Version")
	if len(calls) != 1 {
		t.Fatalf("node b's machined got %d calls", len(calls))
	}

	got, ok, err := authz.CallerFromMetadata(calls[0].Metadata)
	if !ok || err != nil || got != want {
		t.Fatalf("caller passed to node b's machined: %+v (%v, %v), want %+v", got, ok, err, want)
	}

	line := logs.First(t, "finished call", logkey.Method, "Version")
	if line == nil || line[logkey.CallerSerial] != want.Serial || line[logkey.CallerSubject] != want.Subject {
		t.Fatalf("node b's request line %v does not name the client %+v", line, want)
	}

	if via, _ := line[logkey.ForwardedBy].(string); via == "" || via == want.Subject {
		t.Fatalf("node b's request line names forwarded_by %q, want node a's certificate", via)
	}

	// A client naming someone else is refused, directly and through a node.
	forged := metadata.AppendToOutgoingContext(testCtx(t), authz.CallerSerialMetadataKey, "1", authz.CallerSubjectMetadataKey, "CN=someone else")
	for name, ctx := range map[string]context.Context{"direct": forged, "forwarded": client.WithNode(forged, b.IP)} {
		if _, err := c.Version(ctx); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: a client naming a caller: %v, want PermissionDenied", name, err)
		}
	}

	if n := len(b.Backend.CallsTo("/machine.MachineService/Version")); n != 1 {
		t.Fatalf("a refused call reached node b's machined (%d calls)", n)
	}
}

// Another node's apid naming a caller malformed is refused.
func TestMalformedCallerRefused(t *testing.T) {
	p := apidtest.NewPKI(t)
	n := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP})
	node := apidtest.TalosClient(t, n.Addr, p.ClientTLS(t, p.Impersonator(t)))

	for name, pairs := range map[string][]string{
		"serial not hex":  {authz.CallerSerialMetadataKey, "zz", authz.CallerSubjectMetadataKey, "CN=x"},
		"subject missing": {authz.CallerSerialMetadataKey, "ab"},
		"two serials":     {authz.CallerSerialMetadataKey, "ab", authz.CallerSerialMetadataKey, "cd", authz.CallerSubjectMetadataKey, "CN=x"},
	} {
		ctx := metadata.AppendToOutgoingContext(testCtx(t), append([]string{wire.MetadataRole, string(role.Reader)}, pairs...)...)
		if _, err := node.Version(ctx); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}

	ok := metadata.AppendToOutgoingContext(testCtx(t), wire.MetadataRole, string(role.Reader),
		authz.CallerSerialMetadataKey, "ab", authz.CallerSubjectMetadataKey, "CN=client,O=os:reader")
	if _, err := node.Version(ok); err != nil {
		t.Fatalf("a well-formed caller from a node: %v", err)
	}
}
