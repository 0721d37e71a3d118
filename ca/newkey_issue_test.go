package ca_test

import (
	"crypto"
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// TestIssueNewKey: the key is of the CA's type and is the certificate's,
// and the request's names, roles and lifetime are what is issued.
func TestIssueNewKey(t *testing.T) {
	for _, kt := range ca.KeyTypes() {
		t.Run(string(kt), func(t *testing.T) {
			iss := catest.NewIssuer(t, catest.NewCA(t, kt, testutil.Epoch), testutil.Epoch)

			server, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{CommonName: "cp-1", Hosts: []string{"127.9.0.2", "cp-1"}, Profile: ca.ProfileServer, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}

			key, err := ca.ParseKey(keyPEM)
			if err != nil {
				t.Fatal(err)
			}

			if got, _ := ca.KeyTypeOf(key.Public()); got != kt {
				t.Errorf("key type %s, want the CA's %s", got, kt)
			}

			if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(server.Cert.PublicKey) {
				t.Error("the certificate is not for the returned key")
			}

			if server.Cert.Subject.CommonName != "cp-1" || server.Cert.DNSNames[0] != "cp-1" || server.Cert.IPAddresses[0].String() != "127.9.0.2" ||
				server.Cert.NotAfter.Sub(server.Cert.NotBefore) > time.Hour {
				t.Errorf("issued %v %v %v for %s", server.Cert.Subject, server.Cert.DNSNames, server.Cert.IPAddresses, server.Cert.NotAfter.Sub(server.Cert.NotBefore))
			}

			client, _, err := iss.IssueNewKey(ca.KeyRequest{CommonName: "admin", Profile: ca.ProfileClient, Roles: role.NewSet(role.Reader)})
			if err != nil {
				t.Fatal(err)
			}

			if !slices.Equal(client.Cert.Subject.Organization, []string{string(role.Reader)}) {
				t.Errorf("client roles %v", client.Cert.Subject.Organization)
			}
		})
	}
}
