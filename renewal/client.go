package renewal

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aegis-os/aegis/ca"
)

// ClientRenewDivisor sets when a client certificate is renewed: once less
// than 1/ClientRenewDivisor of its lifetime is left. A client runs only
// when its operator runs a command, not on a schedule, so it renews later
// than a node (half-life) but early enough that an operator who works every
// few days keeps a certificate of a week or more alive.
const ClientRenewDivisor = 3

// ClientRenewAt returns when a client certificate is due for renewal: when
// a third of its lifetime is left.
func ClientRenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)

	return cert.NotAfter.Add(-life / ClientRenewDivisor)
}

// ClientRenewalDue is the renewal decision: whether cert, still valid at
// now, should be renewed. An expired or not yet valid certificate is not
// due: it cannot authenticate the renewal (see CheckClientCertificateTime).
func ClientRenewalDue(now time.Time, cert *x509.Certificate) bool {
	return !now.Before(ClientRenewAt(cert)) && CheckClientCertificateTime(now, cert) == nil
}

// CertificateTimeError says that a client certificate is not valid at the
// time it was checked.
type CertificateTimeError struct {
	// Expired is true past NotAfter, false before NotBefore.
	Expired bool
	// At is NotAfter when expired, else NotBefore.
	At time.Time
	// Now is when the check ran.
	Now time.Time
}

// Error names the date and how far it is from now.
func (e *CertificateTimeError) Error() string {
	date := e.At.UTC().Format(time.RFC3339)
	if e.Expired {
		return fmt.Sprintf("client certificate expired at %s (%s ago)", date, e.Now.Sub(e.At).Round(time.Second))
	}

	return fmt.Sprintf("client certificate is not valid until %s (in %s; is this machine's clock behind?)",
		date, e.At.Sub(e.Now).Round(time.Second))
}

// CheckClientCertificateTime returns a *CertificateTimeError when cert is
// not valid at now, so a client can say so before it dials: a server would
// only answer with a failed handshake.
func CheckClientCertificateTime(now time.Time, cert *x509.Certificate) error {
	switch {
	case now.After(cert.NotAfter):
		return &CertificateTimeError{Expired: true, At: cert.NotAfter, Now: now}
	case now.Before(cert.NotBefore):
		return &CertificateTimeError{At: cert.NotBefore, Now: now}
	default:
		return nil
	}
}

// ClientRenewal is one renewal of a client certificate in progress: a new
// key, the request for it and what the new certificate must look like.
type ClientRenewal struct {
	// Old is the certificate being replaced.
	Old *x509.Certificate
	// TTL is the lifetime asked for: the old certificate's.
	TTL time.Duration
	// CSR is the PEM request for the new key: the old common name, no SANs.
	CSR []byte

	key    crypto.Signer
	keyPEM []byte
}

// NewClientRenewal makes a key of the old certificate's key type (Ed25519
// for a type Aegis does not generate) and a request for it. rand nil means
// crypto/rand.
func NewClientRenewal(old *x509.Certificate, rand io.Reader) (*ClientRenewal, error) {
	kt, err := ca.KeyTypeOf(old.PublicKey)
	if err != nil {
		kt = ca.Ed25519
	}

	key, err := ca.GenerateKey(kt, rand)
	if err != nil {
		return nil, err
	}

	csr, err := ca.NewCSR(key, old.Subject.CommonName, nil)
	if err != nil {
		return nil, err
	}

	keyPEM, err := ca.EncodeKey(key)
	if err != nil {
		return nil, err
	}

	return &ClientRenewal{Old: old, TTL: old.NotAfter.Sub(old.NotBefore), CSR: csr, key: key, keyPEM: keyPEM}, nil
}

// KeyPEM returns the new key, PEM encoded.
func (r *ClientRenewal) KeyPEM() []byte { return r.keyPEM }

// Check verifies a certificate returned for the renewal before anything is
// replaced: it is for the new key, chains with the ClientAuth usage at now
// to one of trustedPEM (the CAs the context already trusts, never the CAs
// the reply names: an endpoint that could sign with a CA of its own choosing
// would otherwise make the client trust it), carries exactly the old roles
// and common name, and lives no longer than asked.
func (r *ClientRenewal) Check(crtPEM, trustedPEM []byte, now time.Time) (*x509.Certificate, error) {
	cert, err := ca.ParseCertificate(crtPEM)
	if err != nil {
		return nil, fmt.Errorf("renewal: renewed certificate: %w", err)
	}

	cas, err := ca.ParseAcceptedSet(trustedPEM, now)
	if err != nil {
		return nil, fmt.Errorf("renewal: the context's CAs: %w", err)
	}

	pub, ok := r.key.Public().(interface{ Equal(crypto.PublicKey) bool })

	switch {
	case !ok || !pub.Equal(cert.PublicKey):
		return nil, errors.New("renewal: renewed certificate is not for the new key")
	case !sameStrings(cert.Subject.Organization, r.Old.Subject.Organization):
		return nil, fmt.Errorf("renewal: renewed certificate has roles %q, want %q", cert.Subject.Organization, r.Old.Subject.Organization)
	case cert.Subject.CommonName != r.Old.Subject.CommonName:
		return nil, fmt.Errorf("renewal: renewed certificate is for %q, want %q", cert.Subject.CommonName, r.Old.Subject.CommonName)
	case cert.NotAfter.Sub(cert.NotBefore) > r.TTL:
		return nil, fmt.Errorf("renewal: renewed certificate lives %s, more than the %s asked", cert.NotAfter.Sub(cert.NotBefore), r.TTL)
	}

	if err = cas.Verify(cert, x509.ExtKeyUsageClientAuth, now); err != nil {
		return nil, fmt.Errorf("renewal: renewed certificate does not chain to a CA the context trusts: %w", err)
	}

	return cert, nil
}

func sameStrings(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
