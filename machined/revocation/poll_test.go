package revocation_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// served is a feed holding list at revision 1, for the test trustd.
func served(list ...*revocations.Revocation) *trustd.RevocationFeed {
	f := &trustd.RevocationFeed{}
	f.Set(1, list)

	return f
}

// TestPollerFromTrustd polls a real trustd: a caller with a node
// certificate gets the list; one with a client certificate, or none, is
// refused; when trustd is gone the list stays as it was.
func TestPollerFromTrustd(t *testing.T) {
	notAfter := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: served(
		&revocations.Revocation{Serial: "ab", NotAfter: timestamppb.New(notAfter)},
		&revocations.Revocation{Serial: "cd", NotAfter: timestamppb.New(notAfter)},
	)})

	nodeCrt, nodeKey := trustdtest.ServerCertificate(t, env.CA, "127.0.1.9")
	clientCrt, clientKey := clientCertificate(t, env.CA)

	for _, tt := range []struct {
		name     string
		crt, key []byte
		answered bool
	}{
		{name: "node certificate", crt: nodeCrt, key: nodeKey, answered: true},
		{name: "client certificate", crt: clientCrt, key: clientKey},
		{name: "no certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			list, err := revocation.OpenList(revocation.ListConfig{})
			if err != nil {
				t.Fatal(err)
			}

			p := newPoller(t, env, list, tt.crt, tt.key)

			if got := p.PollOnce(context.Background()); got != tt.answered {
				t.Fatalf("answered %v, want %v", got, tt.answered)
			}

			want := "[]"
			if tt.answered {
				want = "[ab cd]"
			}

			if got := fmt.Sprint(serials(list.Entries())); got != want {
				t.Fatalf("list %s, want %s", got, want)
			}
		})
	}

	t.Run("control plane gone: the list is kept", func(t *testing.T) {
		list, err := revocation.OpenList(revocation.ListConfig{})
		if err != nil {
			t.Fatal(err)
		}

		p := newPoller(t, env, list, nodeCrt, nodeKey)
		if !p.PollOnce(context.Background()) {
			t.Fatal("no answer while trustd runs")
		}

		env.Stop()

		if p.PollOnce(context.Background()) {
			t.Fatal("an answer from a stopped trustd")
		}

		if got := fmt.Sprint(serials(list.Entries())); got != "[ab cd]" {
			t.Fatalf("list %s after a failed poll, want the last one, [ab cd]", got)
		}
	})
}

func newPoller(t *testing.T, env *trustdtest.Env, list *revocation.List, crt, key []byte) *revocation.Poller {
	t.Helper()

	trustd, err := trustdclient.New(trustdclient.Config{
		Endpoints:   []string{env.Addr},
		AcceptedCAs: env.CAs.Pool,
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if crt == nil {
				return &tls.Certificate{}, nil // none to present
			}

			pair, err := tls.X509KeyPair(crt, key)

			return &pair, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = trustd.Close() })

	p, err := revocation.NewPoller(revocation.PollerConfig{Trustd: trustd, List: list})
	if err != nil {
		t.Fatal(err)
	}

	return p
}

// clientCertificate issues a client (ClientAuth only) certificate.
func clientCertificate(t *testing.T, authority *ca.CA) (crt, key []byte) {
	t.Helper()

	k, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		t.Fatal(err)
	}

	csrPEM, err := ca.NewCSR(k, "admin", nil)
	if err != nil {
		t.Fatal(err)
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: authority})
	if err != nil {
		t.Fatal(err)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileClient, Roles: role.NewSet(role.Admin), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	key, err = ca.EncodeKey(k)
	if err != nil {
		t.Fatal(err)
	}

	return issued.PEM, key
}
