package node

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/wire"
)

type auditMachine struct {
	machine.UnimplementedMachineServiceServer

	crt []byte
}

func (m auditMachine) GenerateClientConfiguration(context.Context, *machine.GenerateClientConfigurationRequest) (*machine.GenerateClientConfigurationResponse, error) {
	return &machine.GenerateClientConfigurationResponse{Messages: []*machine.GenerateClientConfiguration{{Crt: m.crt, Key: []byte("SECRET-KEY")}}}, nil
}

type auditTokens struct {
	tokens.UnimplementedTokenServiceServer
}

func (auditTokens) Create(context.Context, *tokens.CreateRequest) (*tokens.CreateResponse, error) {
	created := time.Unix(1_700_000_000, 0)

	return &tokens.CreateResponse{Messages: []*tokens.Created{{Token: "abcdef.SECRETSECRET", Info: &tokens.Token{
		Id: "abcdef", Created: timestamppb.New(created), Expires: timestamppb.New(created.Add(time.Hour)), MaxUses: 3,
	}}}}, nil
}

// Client configurations and token creations are recorded with what they
// hand out and the caller's certificate; refusals too; no secret.
func TestCredentialAudit(t *testing.T) {
	now := time.Now()
	authority := catest.NewCA(t, ca.Ed25519, now)
	iss := catest.NewIssuer(t, authority, now)
	issued := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Reader)
	caller := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Admin).Cert

	var logs logtest.Sink

	srv := newAPIServer(logs.Logger(), nil)
	machine.RegisterMachineServiceServer(srv, auditMachine{crt: issued.PEM})
	tokens.RegisterTokenServiceServer(srv, auditTokens{})

	conn := serveBufconn(t, srv)
	md := metadata.MD{}
	authz.SetCertificateMetadata(md, caller)

	admin := metadata.NewOutgoingContext(t.Context(), metadata.Join(md, metadata.Pairs(wire.MetadataRole, string(role.Admin))))
	reader := metadata.NewOutgoingContext(t.Context(), metadata.Join(md, metadata.Pairs(wire.MetadataRole, string(role.Reader))))

	if _, err := machine.NewMachineServiceClient(conn).GenerateClientConfiguration(admin, &machine.GenerateClientConfigurationRequest{}); err != nil {
		t.Fatal(err)
	}

	if _, err := tokens.NewTokenServiceClient(conn).Create(admin, &tokens.CreateRequest{}); err != nil {
		t.Fatal(err)
	}

	_, err := machine.NewMachineServiceClient(conn).GenerateClientConfiguration(reader, &machine.GenerateClientConfigurationRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader: %v", err)
	}

	recs := auditRecords(t, logs.String())
	if len(recs) != 3 {
		t.Fatalf("%d audit records, want 3:\n%s", len(recs), logs.String())
	}

	want := []map[string]any{
		{"msg": MsgCredentialIssued, AuditMethod: machine.MachineService_GenerateClientConfiguration_FullMethodName,
			AuditSerial: issued.Cert.SerialNumber.Text(16), AuditSubject: issued.Cert.Subject.String(),
			AuditTTL: time.Hour.String()},
		{"msg": MsgCredentialIssued, AuditMethod: tokens.TokenService_Create_FullMethodName,
			AuditTokenID: "abcdef", AuditTTL: time.Hour.String(), AuditMaxUses: float64(3)},
		{"msg": MsgCredentialRefused, AuditCode: "PermissionDenied"},
	}

	for i, w := range want {
		w[AuditCallerSerial] = caller.SerialNumber.Text(16)
		w[AuditCallerSubject] = caller.Subject.String()

		for k, v := range w {
			if recs[i][k] != v {
				t.Errorf("record %d: %s = %v, want %v", i, k, recs[i][k], v)
			}
		}
	}

	if roles, _ := recs[0][AuditRoles].([]any); len(roles) != 1 || roles[0] != string(role.Reader) {
		t.Errorf("roles %v", recs[0][AuditRoles])
	}

	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("a secret reached the log:\n%s", logs.String())
	}
}

func auditRecords(t *testing.T, log string) []map[string]any {
	t.Helper()

	var out []map[string]any

	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		var r map[string]any
		if err := json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}

		if r["msg"] == MsgCredentialIssued || r["msg"] == MsgCredentialRefused {
			out = append(out, r)
		}
	}

	return out
}

// A call another node forwarded arrives with that node's certificate and
// the caller its apid names: the record names the caller, and the node
// in forwarded_by.
func TestCredentialAuditNamesForwardedCaller(t *testing.T) {
	now := time.Now()
	authority := catest.NewCA(t, ca.Ed25519, now)
	iss := catest.NewIssuer(t, authority, now)
	issued := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Reader)
	client := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Admin).Cert
	node := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileImpersonator, 0).Cert

	var logs logtest.Sink

	srv := newAPIServer(logs.Logger(), nil)
	machine.RegisterMachineServiceServer(srv, auditMachine{crt: issued.PEM})

	conn := serveBufconn(t, srv)
	md := metadata.Pairs(wire.MetadataRole, string(role.Admin))
	authz.SetCertificateMetadata(md, node)
	authz.SetCallerMetadata(md, authz.CallerOfCertificate(client))

	if _, err := machine.NewMachineServiceClient(conn).GenerateClientConfiguration(metadata.NewOutgoingContext(t.Context(), md),
		&machine.GenerateClientConfigurationRequest{}); err != nil {
		t.Fatal(err)
	}

	recs := auditRecords(t, logs.String())
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1:\n%s", len(recs), logs.String())
	}

	for k, v := range map[string]any{
		AuditCallerSerial: client.SerialNumber.Text(16), AuditCallerSubject: client.Subject.String(), AuditForwardedBy: node.Subject.String(),
	} {
		if recs[0][k] != v {
			t.Errorf("%s = %v, want %v", k, recs[0][k], v)
		}
	}
}
