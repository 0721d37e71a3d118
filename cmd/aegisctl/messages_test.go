package main

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// TestMessages keeps the messages a person reads most in one golden file:
// errors of calls that failed, of a missing client config, and what cluster
// create suggests next. Run with -update after a deliberate change.
func TestMessages(t *testing.T) {
	var out bytes.Buffer

	show := func(title, msg string) { fmt.Fprintf(&out, "== %s\n%s\n\n", title, msg) }

	one := &session{name: "prod", endpoints: []string{"127.6.0.2"}}
	calls := []struct {
		title string
		s     *session
		err   error
	}{
		{
			title: "server certificate from another CA, with x509's hint",
			s:     one,
			err: status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: `+
				`x509: certificate signed by unknown authority (possibly because of \"x509: Ed25519 verification failure\" while trying to verify candidate authority certificate \"os\")"`),
		},
		{
			title: "endpoint on trustd's port (-e 127.6.0.2:50001)",
			s:     &session{name: "prod", endpoints: []string{"127.6.0.2:50001"}},
			err:   status.Error(codes.Unimplemented, "unknown service machine.MachineService"),
		},
		{
			title: "endpoint that is not apid (-e 127.6.0.2:8080)",
			s:     &session{name: "prod", endpoints: []string{"127.6.0.2:8080"}},
			err:   status.Error(codes.Unimplemented, "unknown service machine.MachineService"),
		},
		{
			title: "endpoint name that does not resolve (-e nosuch.example)",
			s:     &session{name: "prod", endpoints: []string{"nosuch.example"}},
			err:   status.Error(codes.Unavailable, "dns: A record lookup error: lookup nosuch.example on 127.0.0.53:53: no such host"),
		},
	}

	for _, c := range calls {
		show(c.title, c.s.explain(c.err).Error())
	}

	dir := t.TempDir()
	for _, args := range [][]string{
		{"config", "contexts"},
		{"config", "info"},
		{"config", "context", "x"}, // writes: a missing file is an empty config
		{"version"},
	} {
		_, err := run(t, dir, append([]string{"--aegisconfig", "missing-config"}, args...)...)
		show(fmt.Sprintf("aegisctl %v without a client config", args), fmt.Sprint(err))
	}

	addrs := []string{"127.5.0.2", "127.5.0.3"}
	show("cluster create, defaults", nextSteps("aegisctl", "aegis-local", addrs, "/home/ops/.aegis/config", "", ""))
	show("bin/aegisctl cluster create --state-dir /tmp/clusters --aegisconfig ./my config",
		nextSteps("bin/aegisctl", "demo", addrs, "my config", "my config", "/tmp/clusters"))

	golden.Compare(t, "messages.golden", out.Bytes())
}
