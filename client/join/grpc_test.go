package join_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestJoinOverGRPC joins a real in-process trustd through the default
// transport, and fails to when trustd's certificate is not from a CA the
// node trusts.
func TestJoinOverGRPC(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	tok, _ := token.Parse(trustdtest.StaticToken)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)

	stranger := catest.NewCA(t, ca.Ed25519, time.Now())
	strangerCAs, err := ca.NewAcceptedSet(time.Now(), stranger.Cert)
	if err != nil {
		t.Fatal(err)
	}

	// trustd grants the static token the address the call comes from: a
	// node binds the address it names.
	tests := []struct {
		name    string
		cas     *ca.AcceptedSet
		source  string
		sans    []string
		wantErr string
	}{
		{name: "trusted", cas: env.CAs, source: "127.0.1.7", sans: []string{"127.0.1.7"}},
		{name: "untrusted server certificate", cas: strangerCAs, source: "127.0.1.7", sans: []string{"127.0.1.7"}, wantErr: "certificate signed by unknown authority"},
		{name: "an address not the source", cas: env.CAs, sans: []string{"127.0.1.7"}, wantErr: "InvalidArgument"},
		{name: "the control plane's address", cas: env.CAs, source: "127.0.1.8", sans: []string{"127.0.1.8", trustdtest.ListenIP}, wantErr: "PermissionDenied"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := join.New(join.Config{
				Endpoints: []string{env.Addr}, Token: tok, CAs: tt.cas, CA: env.CA.Cert,
				Hostname: tt.sans[0], SANs: tt.sans, Source: tt.source, MaxAttempts: 1,
			})
			if err != nil {
				t.Fatal(err)
			}

			res, err := c.Join(ctx)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if res.Certificate.Subject.CommonName != "127.0.1.7" || len(res.Certificate.IPAddresses) != 1 {
				t.Fatalf("certificate for %s %v", res.Certificate.Subject.CommonName, res.Certificate.IPAddresses)
			}
		})
	}
}
