package main

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestExplain(t *testing.T) {
	s := &session{name: "prod", endpoints: []string{"127.6.0.2", "127.6.0.3"}}
	one := &session{name: "prod", endpoints: []string{"127.6.0.2"}}

	tests := []struct {
		name string
		s    *session
		err  error
		want string
	}{
		{
			name: "endpoint refuses connections",
			s:    one,
			err:  status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.6.0.2:50000: connect: connection refused"`),
			want: "cannot reach endpoint 127.6.0.2: dial tcp 127.6.0.2:50000: connect: connection refused",
		},
		{
			name: "several endpoints",
			s:    s,
			err:  status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.6.0.3:50000: i/o timeout"`),
			want: "cannot reach endpoints 127.6.0.2, 127.6.0.3: dial tcp 127.6.0.3:50000: i/o timeout",
		},
		{
			name: "server certificate from another CA",
			s:    one,
			err:  status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			want: "cannot reach endpoint 127.6.0.2: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority",
		},
		{
			name: "server certificate with a hint, quotes escaped",
			s:    one,
			err: status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: `+
				`x509: certificate signed by unknown authority (possibly because of \"x509: Ed25519 verification failure\" while trying to verify candidate authority certificate \"os\")"`),
			want: `cannot reach endpoint 127.6.0.2: authentication handshake failed: tls: failed to verify certificate: ` +
				`x509: certificate signed by unknown authority (possibly because of "x509: Ed25519 verification failure" while trying to verify candidate authority certificate "os")`,
		},
		{
			name: "unknown host name",
			s:    &session{name: "prod", endpoints: []string{"nosuch.example", "127.6.0.2"}},
			err:  status.Error(codes.Unavailable, "dns: A record lookup error: lookup nosuch.example on 127.0.0.53:53: no such host"),
			want: "cannot reach endpoint nosuch.example: its name does not resolve: lookup nosuch.example on 127.0.0.53:53: no such host",
		},
		{
			name: "unknown host name, port given",
			s:    &session{name: "prod", endpoints: []string{"nosuch.example:50000"}},
			err:  status.Error(codes.Unavailable, "dns: A record lookup error: lookup nosuch.example on 127.0.0.53:53: no such host"),
			want: "cannot reach endpoint nosuch.example:50000: its name does not resolve: lookup nosuch.example on 127.0.0.53:53: no such host",
		},
		{
			name: "no address for a host name",
			s:    &session{name: "prod", endpoints: []string{"nosuchhost", "127.6.0.2"}},
			err:  status.Error(codes.Unavailable, "name resolver error: produced zero addresses"),
			want: "cannot reach endpoint nosuchhost: no address found for it (name resolver error: produced zero addresses): " +
				"check the name and this machine's DNS, or give the node's IP address with -e",
		},
		{
			name: "trustd's port",
			s:    &session{name: "prod", endpoints: []string{"127.6.0.2:50001"}},
			err:  status.Error(codes.Unimplemented, "unknown service machine.MachineService"),
			want: "endpoint 127.6.0.2:50001 is trustd's port, which serves no node commands: use 127.6.0.2 (apid, port 50000)",
		},
		{
			name: "trustd's port, IPv6",
			s:    &session{name: "prod", endpoints: []string{"[fd00::2]:50001"}},
			err:  status.Error(codes.Unimplemented, "unknown service machine.MachineService"),
			want: "endpoint [fd00::2]:50001 is trustd's port, which serves no node commands: use fd00::2 (apid, port 50000)",
		},
		{
			name: "some other service",
			s:    &session{name: "prod", endpoints: []string{"127.6.0.2:8080"}},
			err:  status.Error(codes.Unimplemented, "unknown service machine.MachineService"),
			want: "endpoint 127.6.0.2:8080 does not serve machine.MachineService: is it apid (port 50000)?",
		},
		{
			name: "endpoint restarting",
			s:    one,
			err:  status.Error(codes.Unavailable, `connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "graceful_stop"`),
			want: "cannot reach endpoint 127.6.0.2: error reading from server: EOF (the endpoint closed the connection: it was stopping or restarting)",
		},
		{
			name: "node's machined down",
			s:    one,
			err:  status.Error(codes.Unavailable, "machined is not answering"),
			want: "unavailable: machined is not answering",
		},
		{
			name: "permission denied names method and roles",
			s:    one,
			err:  status.Error(codes.PermissionDenied, "authz: /machine.MachineService/ServiceRestart needs one of os:admin, os:operator; caller has os:reader"),
			want: `permission denied: /machine.MachineService/ServiceRestart needs one of os:admin, os:operator; caller has os:reader (context "prod")`,
		},
		{
			name: "certificate refused",
			s:    one,
			err:  status.Error(codes.Unauthenticated, "no verified client certificate"),
			want: `127.6.0.2 refused the client certificate of context "prod": no verified client certificate`,
		},
		{
			name: "certificate refused in the handshake",
			s:    one,
			err:  status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: bad certificate"`),
			want: `127.6.0.2 refused the client certificate of context "prod" in the TLS handshake: it is revoked, or its CA is no longer accepted (aegisctl config info shows it)`,
		},
		{name: "other codes in words", s: one, err: status.Error(codes.NotFound, `log "x" was not registered`), want: `not found: log "x" was not registered`},
		{name: "failed precondition", s: one, err: status.Error(codes.FailedPrecondition, "use a control-plane endpoint"), want: "failed precondition: use a control-plane endpoint"},
		{name: "not a status", s: one, err: errors.New("plain"), want: "plain"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.explain(tt.err); got == nil || got.Error() != tt.want {
				t.Fatalf("explain = %v\nwant        %s", got, tt.want)
			}
		})
	}

	if one.explain(nil) != nil {
		t.Fatal("explain(nil) is not nil")
	}
}
