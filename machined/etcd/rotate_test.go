package etcd

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestRestartAllowed(t *testing.T) {
	down := errors.New("not answering")
	voter := func(id uint64, err error) MemberHealth { return MemberHealth{ID: id, Name: formatID(id), Err: err} }
	learner := func(id uint64, err error) MemberHealth {
		return MemberHealth{ID: id, Name: formatID(id), Learner: true, Err: err}
	}

	for name, tc := range map[string]struct {
		members []MemberHealth
		self    uint64
		ok      bool
	}{
		"three, all up":             {[]MemberHealth{voter(1, nil), voter(2, nil), voter(3, nil)}, 1, true},
		"three, self already down":  {[]MemberHealth{voter(1, down), voter(2, nil), voter(3, nil)}, 1, true},
		"three, another down":       {[]MemberHealth{voter(1, nil), voter(2, down), voter(3, nil)}, 1, false},
		"five, another down":        {[]MemberHealth{voter(1, nil), voter(2, down), voter(3, nil), voter(4, nil), voter(5, nil)}, 1, false},
		"two, the other up":         {[]MemberHealth{voter(1, nil), voter(2, nil)}, 1, false},
		"one voter":                 {[]MemberHealth{voter(1, nil)}, 1, true},
		"one voter and a learner":   {[]MemberHealth{voter(1, nil), learner(2, down)}, 1, true},
		"a learner restarts":        {[]MemberHealth{voter(1, down), voter(2, nil), voter(3, nil), learner(4, nil)}, 4, true},
		"learners do not count":     {[]MemberHealth{voter(1, nil), voter(2, nil), learner(3, nil), learner(4, nil)}, 1, false},
		"three and a learner down":  {[]MemberHealth{voter(1, nil), voter(2, nil), voter(3, nil), learner(4, down)}, 1, true},
		"not a member":              {[]MemberHealth{voter(1, nil), voter(2, nil), voter(3, nil)}, 9, false},
		"member id unknown (zero)":  {[]MemberHealth{voter(1, nil), voter(2, nil), voter(3, nil)}, 0, false},
		"every other voter is down": {[]MemberHealth{voter(1, nil), voter(2, down), voter(3, down)}, 1, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := restartAllowed(tc.members, tc.self)
			if (err == nil) != tc.ok {
				t.Fatalf("restartAllowed = %v, want ok=%v", err, tc.ok)
			}

			if err != nil && !errors.Is(err, ErrRestartRefused) {
				t.Fatalf("refusal %v is not ErrRestartRefused", err)
			}
		})
	}
}

// TestSetCAs walks the three steps of a rotation through the member's
// files: the trusted bundle its clients read, and its certificates.
func TestSetCAs(t *testing.T) {
	e := newTest(t)
	old := e.cfg.CA
	newCA := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)

	var loaded [][]byte

	e.cfg.Clock = clock.NewFake(testutil.Epoch.Add(time.Hour))
	e.cfg.OnTrust = func(pem []byte) { loaded = append(loaded, pem) }

	if _, err := e.IssueCertificates(); err != nil {
		t.Fatal(err)
	}

	check := func(step string, trusted []*ca.CA, issuer *ca.CA) {
		t.Helper()

		data, err := os.ReadFile(e.caFile())
		if err != nil {
			t.Fatal(err)
		}

		pool, n := x509.NewCertPool(), 0
		for rest := data; ; n++ {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
		}

		pool.AppendCertsFromPEM(data)

		if n != len(trusted) {
			t.Fatalf("%s: %d trusted CAs in the file, want %d", step, n, len(trusted))
		}

		for name, crt := range e.Certificates() {
			if name == "ca" {
				continue
			}

			if err := crt.CheckSignatureFrom(issuer.Cert); err != nil {
				t.Errorf("%s: the %s certificate is not from the expected CA: %v", step, name, err)
			}

			opts := x509.VerifyOptions{Roots: pool, CurrentTime: testutil.Epoch.Add(time.Hour), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			if _, err := crt.Verify(opts); err != nil {
				t.Errorf("%s: the %s certificate does not verify against the trusted CAs: %v", step, name, err)
			}
		}
	}

	check("before", []*ca.CA{old}, old)

	steps := []struct {
		name     string
		issuing  *ca.CA
		accepted []*x509.Certificate
		trusted  []*ca.CA
	}{
		{"accept", old, []*x509.Certificate{newCA.Cert}, []*ca.CA{old, newCA}},
		{"issue", newCA, []*x509.Certificate{old.Cert}, []*ca.CA{newCA, old}},
		{"drop", newCA, nil, []*ca.CA{newCA}},
	}

	for _, s := range steps {
		if err := e.SetCAs(s.issuing, s.accepted); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}

		check(s.name, s.trusted, s.issuing)
	}

	ended := e.loadedTrust()
	ended()

	if len(loaded) != 2 || !bytes.Equal(loaded[0], e.trustedPEM()) || loaded[1] != nil {
		t.Fatalf("OnTrust told %d times, want the file at the start and nil at the end", len(loaded))
	}
}

// TestCertificatesDuringOverlap: the "ca" certificate is the issuing etcd
// CA while the trusted file holds two.
func TestCertificatesDuringOverlap(t *testing.T) {
	e := newTest(t)
	e.cfg.Clock = clock.NewFake(testutil.Epoch.Add(time.Hour))
	newCA := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)

	if _, err := e.IssueCertificates(); err != nil {
		t.Fatal(err)
	}

	if err := e.SetCAs(newCA, []*x509.Certificate{e.cfg.CA.Cert}); err != nil {
		t.Fatal(err)
	}

	if got := e.Certificates()["ca"]; got == nil || !got.Equal(newCA.Cert) {
		t.Fatal("the etcd CA shown is not the issuing one")
	}
}
