package certapi

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/serial"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/revocation"
)

// lineageFixture is a control plane's certificate service recording its
// renewals in a real etcd.
type lineageFixture struct {
	iss   *ca.Issuer
	store *revocation.Store
	srv   *Server
	sink  *logtest.Sink
	stop  func()
}

func newLineageFixture(t *testing.T) *lineageFixture {
	t.Helper()

	now := testutil.Epoch
	e, stop := etcdtest.Start(t)

	store, err := revocation.NewStore(revocation.StoreConfig{Client: etcdtest.Client(t, e), Clock: clock.NewFake(now), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	f := &lineageFixture{iss: catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour)), now), store: store, sink: &logtest.Sink{}, stop: stop}
	f.srv = New(Config{Authority: authority{iss: f.iss}, Lineage: store, Logger: f.sink.Logger()})

	return f
}

// renew renews cert as its holder would.
func (f *lineageFixture) renew(t *testing.T, cert *x509.Certificate) (*x509.Certificate, error) {
	t.Helper()

	csr := catest.CSR(t, catest.Key(t, ca.Ed25519), &x509.CertificateRequest{Subject: pkix.Name{CommonName: cert.Subject.CommonName}})

	resp, err := f.srv.Renew(callContext(nil, cert), &certificates.RenewRequest{Csr: csr})
	if err != nil {
		return nil, err
	}

	return ca.ParseCertificate(resp.GetMessages()[0].GetCrt())
}

func (f *lineageFixture) revoke(t *testing.T, cert *x509.Certificate) revocation.Revocation {
	t.Helper()

	rev, err := f.store.Revoke(context.Background(), revocation.Entry{Serial: serial.Of(cert.SerialNumber), NotAfter: cert.NotAfter})
	if err != nil {
		t.Fatal(err)
	}

	return rev
}

func serialsOf(certs ...*x509.Certificate) []string {
	out := make([]string, 0, len(certs))
	for _, c := range certs {
		out = append(out, serial.Of(c.SerialNumber))
	}

	slices.Sort(out)

	return out
}

// TestRenewRecordsLineage: what is renewed from a certificate is revoked
// with it, however many renewals down, and renews nothing from then on;
// its parent and siblings are not revoked.
func TestRenewRecordsLineage(t *testing.T) {
	f := newLineageFixture(t)
	parent := presented(t, f.iss, ca.ProfileClient, "alice", time.Hour, role.Admin)

	must := func(c *x509.Certificate, err error) *x509.Certificate {
		t.Helper()

		if err != nil {
			t.Fatal(err)
		}

		return c
	}

	child := must(f.renew(t, parent))
	grandchild := must(f.renew(t, child))
	sibling := must(f.renew(t, parent))

	rev := f.revoke(t, child)

	var covered []string
	for _, d := range rev.Descendants {
		covered = append(covered, d.Serial)
	}

	if want := serialsOf(grandchild); !slices.Equal(covered, want) {
		t.Fatalf("the revocation of the child covers %v, want the grandchild %v", covered, want)
	}

	for name, c := range map[string]*x509.Certificate{"child": child, "grandchild": grandchild} {
		_, err := f.renew(t, c)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "is revoked, or renewed from a revoked one") {
			t.Errorf("renewal of the revoked %s: %v, want PermissionDenied naming the revocation", name, err)
		}
	}

	for name, c := range map[string]*x509.Certificate{"parent": parent, "sibling": sibling} {
		if _, err := f.renew(t, c); err != nil {
			t.Errorf("renewal of the %s, not revoked: %v", name, err)
		}
	}
}

// TestRenewWhileRevoked renews from one certificate on many goroutines
// while it is revoked: every certificate handed out is revoked.
func TestRenewWhileRevoked(t *testing.T) {
	f := newLineageFixture(t)
	parent := presented(t, f.iss, ca.ProfileClient, "alice", time.Hour, role.Admin)

	var (
		mu     sync.Mutex
		issued []*x509.Certificate
		wg     sync.WaitGroup
	)

	for range 8 {
		wg.Go(func() {
			for range 4 {
				c, err := f.renew(t, parent)
				if err != nil {
					if status.Code(err) != codes.PermissionDenied && status.Code(err) != codes.Unavailable {
						t.Errorf("renewal: %v", err)
					}

					return
				}

				mu.Lock()
				issued = append(issued, c)
				mu.Unlock()
			}
		})
	}

	f.revoke(t, parent)
	wg.Wait()

	list, err := f.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	revoked := revocation.Serials(list)
	for _, c := range issued {
		if _, ok := revoked[serial.Of(c.SerialNumber)]; !ok {
			t.Errorf("%s was renewed from the revoked certificate and is not revoked", serial.Of(c.SerialNumber))
		}
	}

	t.Logf("%d renewals handed out, all revoked", len(issued))
}

// TestRenewFailsClosedWithoutEtcd: a renewal that cannot be recorded hands
// out no certificate.
func TestRenewFailsClosedWithoutEtcd(t *testing.T) {
	f := newLineageFixture(t)
	parent := presented(t, f.iss, ca.ProfileClient, "alice", time.Hour, role.Reader, role.Operator)

	f.stop()

	_, err := f.renew(t, parent)
	checkRefusal(t, f.sink, err, codes.Unavailable, "recorded in the cluster state in etcd")
}
