package ca_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// TestSigningAnnouncesTheCertificate: Request.Signing is told, once, the
// serial and end of validity of the certificate Issue returns, and never
// for a request refused before signing.
func TestSigningAnnouncesTheCertificate(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	iss := catest.NewIssuer(t, authority, testutil.Epoch)

	var (
		calls    int
		serial   *big.Int
		notAfter time.Time
	)

	announce := func(s *big.Int, na time.Time) { calls, serial, notAfter = calls+1, s, na }

	issued, err := iss.Issue(ca.Request{CSR: parsedCSR(t), Profile: ca.ProfileServer, Signing: announce})
	if err != nil {
		t.Fatal(err)
	}

	if calls != 1 || serial.Cmp(issued.Cert.SerialNumber) != 0 || !notAfter.Equal(issued.Cert.NotAfter) {
		t.Fatalf("announced %d times: serial %v, not after %v; issued %v, %v",
			calls, serial, notAfter, issued.Cert.SerialNumber, issued.Cert.NotAfter)
	}

	if _, err = iss.Issue(ca.Request{CSR: parsedCSR(t), Profile: "nope", Signing: announce}); err == nil || calls != 1 {
		t.Fatalf("a refused request: %v, announced %d times", err, calls)
	}
}
