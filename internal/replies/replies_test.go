package replies

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFailure(t *testing.T) {
	tests := []struct {
		name   string
		md     *common.Metadata
		want   string
		failed bool
	}{
		{name: "no metadata"},
		{name: "no error", md: &common.Metadata{Hostname: "10.0.0.2"}},
		{name: "error text", md: &common.Metadata{Hostname: "10.0.0.2", Error: "boom"}, want: "boom", failed: true},
		{
			name: "status worded",
			md: &common.Metadata{Error: "rpc error", Status: status.New(codes.PermissionDenied,
				"authz: /machine.MachineService/Reboot needs os:admin").Proto()},
			want: "permission denied: /machine.MachineService/Reboot needs os:admin", failed: true,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, failed := Failure(tt.md)
			if got != tt.want || failed != tt.failed {
				t.Fatalf("Failure = %q, %v; want %q, %v", got, failed, tt.want, tt.failed)
			}
		})
	}
}

func TestDescribeStatus(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		msg  string
		want string
	}{
		{
			name: "dial failure", code: codes.Unavailable,
			msg:  `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`,
			want: "unreachable: dial tcp 127.0.0.1:1: connect: connection refused",
		},
		{name: "apid's unreachable node", code: codes.Unavailable, msg: "apid: node 10.0.0.9 unreachable", want: "unreachable (apid could not connect to the node)"},
		{name: "unavailable", code: codes.Unavailable, msg: "etcd: no quorum", want: "unavailable: etcd: no quorum"},
		{name: "permission", code: codes.PermissionDenied, msg: "authz: needs os:admin", want: "permission denied: needs os:admin"},
		{name: "deadline", code: codes.DeadlineExceeded, msg: "5s", want: "no answer in time: 5s"},
		{name: "unimplemented", code: codes.Unimplemented, msg: "Upgrade", want: "not implemented by the node: Upgrade"},
		{name: "other", code: codes.FailedPrecondition, msg: "time not synced", want: "failed precondition: time not synced"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DescribeStatus(status.New(tt.code, tt.msg)); got != tt.want {
				t.Fatalf("DescribeStatus = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTransportCause(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want string
		dial bool
	}{
		{name: "not about the connection", msg: "etcd: no quorum"},
		{
			name: "escaped quotes kept",
			msg:  `connection error: desc = "transport: authentication handshake failed: x509: certificate signed by unknown authority (possibly because of \"crypto/rsa: verification error\")"`,
			want: `authentication handshake failed: x509: certificate signed by unknown authority (possibly because of "crypto/rsa: verification error")`,
			dial: true,
		},
		{
			name: "goaway",
			msg:  `connection error: desc = "transport: Error while dialing: EOF", received prior goaway`,
			want: "EOF (the endpoint closed the connection: it was stopping or restarting)",
			dial: true,
		},
		{name: "unquoted", msg: "connection error: desc = transport: closed", want: "closed", dial: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dial := TransportCause(tt.msg)
			if got != tt.want || dial != tt.dial {
				t.Fatalf("TransportCause = %q, %v; want %q, %v", got, dial, tt.want, tt.dial)
			}
		})
	}
}

func TestCodeWords(t *testing.T) {
	for code, want := range map[codes.Code]string{
		codes.NotFound:           "not found",
		codes.Internal:           "internal",
		codes.FailedPrecondition: "failed precondition",
	} {
		if got := CodeWords(code); got != want {
			t.Errorf("CodeWords(%v) = %q, want %q", code, got, want)
		}
	}
}

func TestPermissionText(t *testing.T) {
	for msg, want := range map[string]string{"authz: needs os:admin": "needs os:admin", "needs os:admin": "needs os:admin"} {
		if got := PermissionText(msg); got != want {
			t.Errorf("PermissionText(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestMessagesAndMetadata(t *testing.T) {
	resp := &machine.VersionResponse{Messages: []*machine.Version{
		{Metadata: &common.Metadata{Hostname: "a"}},
		{},
	}}

	msgs := Messages(resp)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}

	if md := Metadata(msgs[0]); md.GetHostname() != "a" {
		t.Fatalf("metadata of the first: %v, want hostname a", md)
	}

	if md := Metadata(msgs[1]); md != nil {
		t.Fatalf("metadata of the second: %v, want none", md)
	}

	if got := Messages(&common.Metadata{}); got != nil {
		t.Fatalf("a message without `messages`: %v, want none", got)
	}
}
