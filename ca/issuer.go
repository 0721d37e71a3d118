package ca

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/defaults"
)

// IssuerConfig configures an Issuer. Only CA is required; the config is read
// once by NewIssuer and may be changed or reused afterwards.
type IssuerConfig struct {
	// CA signs every certificate. Required.
	CA *CA
	// MaxTTL lowers the longest lifetime of a profile below its default
	// (DefaultsFor). Profiles missing from the map keep the default; a value
	// above the default is refused.
	MaxTTL map[Profile]time.Duration
	// Clock decides validity periods. Nil means the system clock.
	Clock Clock
	// Rand is the source of serial numbers. Nil means crypto/rand.
	Rand io.Reader
}

// Issuer issues certificates from checked CSRs under the fixed profiles. It is
// safe for concurrent use.
type Issuer struct {
	ca *CA
	// policy holds each profile's usages, read once from the cfssl signing
	// profiles that remain the source of policy.
	policy map[Profile]profilePolicy
	maxTTL map[Profile]time.Duration
	clock  Clock
	rand   io.Reader
}

// Request is one certificate to issue.
type Request struct {
	// CSR supplies the public key, common name and SANs, nothing else.
	CSR *CSR
	// Profile decides the kind of certificate.
	Profile Profile
	// Roles go into the Organization of a client certificate; they are
	// refused for the other profiles.
	Roles role.Set
	// TTL is the lifetime asked for. Zero means the profile's default; more
	// than the profile's maximum is cut down to it.
	TTL time.Duration
	// Signing, if set, is told the serial and end of validity decided,
	// just before the certificate is signed: a caller that records its
	// issuances can write the record while the signature is made. Issue
	// may still fail after it.
	Signing func(serial *big.Int, notAfter time.Time)
}

// Issued is a signed certificate.
type Issued struct {
	Cert *x509.Certificate
	PEM  []byte
}

// NewIssuer builds an Issuer around cfg.CA.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	if cfg.CA == nil || cfg.CA.Cert == nil || cfg.CA.Key == nil {
		return nil, errors.New("ca: issuer needs a CA with certificate and key")
	}

	cfg.Clock = defaults.Now(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)

	maxTTL := map[Profile]time.Duration{}

	for _, p := range Profiles() {
		maxTTL[p] = DefaultsFor(p).MaxTTL
	}

	for p, d := range cfg.MaxTTL {
		if !p.known() {
			return nil, refuse(ReasonProfile, "%q", p)
		}

		if d <= 0 || d > DefaultsFor(p).MaxTTL {
			return nil, refuse(ReasonTTL, "max TTL %s for profile %s outside (0, %s]", d, p, DefaultsFor(p).MaxTTL)
		}

		maxTTL[p] = d
	}

	policy, err := policyFromCfssl(cfsslPolicy())
	if err != nil {
		return nil, err
	}

	return &Issuer{ca: cfg.CA, policy: policy, maxTTL: maxTTL, clock: cfg.Clock, rand: cfg.Rand}, nil
}

// CA returns the issuing CA.
func (i *Issuer) CA() *CA { return i.ca }

// Issue signs req. The steps run in a fixed order: decide the profile's
// fields, decide the validity window, build the certificate from the CSR
// ParseCSR already parsed and verified (its key, common name and SANs,
// nothing else), sign it once, and re-check the fields of the result
// against what was decided, so a surprise in the signing layer never
// leaves the issuer as a valid certificate.
//
// The signature is checked once, by x509.CreateCertificate itself (it
// verifies every signature it makes against the CA's public key, since Go
// 1.16 and still in 1.26); the re-check reads fields and verifies nothing.
func (i *Issuer) Issue(req Request) (*Issued, error) {
	if req.CSR == nil || req.CSR.Request == nil {
		return nil, refuse(ReasonBadCSR, "no CSR")
	}

	if !req.Profile.known() {
		return nil, refuse(ReasonProfile, "%q (known: server, client, impersonator, peer)", req.Profile)
	}

	org, err := req.Profile.organization(req.Roles)
	if err != nil {
		return nil, err
	}

	notBefore, notAfter, err := i.validity(req.Profile, req.TTL)
	if err != nil {
		return nil, err
	}

	serial, err := randomSerial(i.rand)
	if err != nil {
		return nil, err
	}

	tmpl, err := i.template(req, org, serial, notBefore, notAfter)
	if err != nil {
		return nil, err
	}

	if req.Signing != nil {
		req.Signing(serial, notAfter)
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca.Cert, req.CSR.Request.PublicKey, i.ca.Key)
	if err != nil {
		return nil, fmt.Errorf("ca: signing: %w", err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: reading signed certificate: %w", err)
	}

	if err = i.recheck(cert, tmpl, req); err != nil {
		return nil, fmt.Errorf("ca: signed certificate failed re-check: %w", err)
	}

	return &Issued{Cert: cert, PEM: EncodeCertificate(cert)}, nil
}

// template is the certificate to sign. Only the public key, the common
// name and the DNS and IP SANs come from the CSR; the profile decides the
// rest. The authority key id is the CA's subject key id, which
// x509.CreateCertificate copies from the CA certificate.
func (i *Issuer) template(req Request, org []string, serial *big.Int, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	csr := req.CSR.Request
	pol := i.policy[req.Profile]

	ski, err := subjectKeyIDOf(csr.RawSubjectPublicKeyInfo)
	if err != nil {
		return nil, err
	}

	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: csr.Subject.CommonName, Organization: org},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              pol.keyUsage,
		ExtKeyUsage:           pol.extKeyUsage,
		BasicConstraintsValid: true,
		SubjectKeyId:          ski,
		DNSNames:              csr.DNSNames,
		IPAddresses:           csr.IPAddresses,
	}, nil
}

// validity decides the window: the TTL asked for, defaulted and capped by
// the profile, starting a little in the past for clock skew (taken out of the
// lifetime), and never past the CA's own expiry.
func (i *Issuer) validity(p Profile, ttl time.Duration) (time.Time, time.Time, error) {
	switch {
	case ttl < 0:
		return time.Time{}, time.Time{}, refuse(ReasonTTL, "negative TTL %s", ttl)
	case ttl == 0:
		ttl = min(DefaultsFor(p).TTL, i.maxTTL[p])
	case ttl > i.maxTTL[p]:
		ttl = i.maxTTL[p]
	}

	now := i.clock.Now()
	if err := checkValidity(i.ca.Cert, now); err != nil {
		return time.Time{}, time.Time{}, err
	}

	skew := min(ClockSkew, ttl/10)
	notBefore := now.Add(-skew).Truncate(time.Second)
	notAfter := notBefore.Add(ttl)

	if notAfter.After(i.ca.Cert.NotAfter) {
		notAfter = i.ca.Cert.NotAfter
	}

	return notBefore.UTC(), notAfter.UTC(), nil
}

// recheck compares the signed certificate, parsed from its DER, with the
// template it was made from and with Aegis's own profile table (not the
// cfssl policy the template's usages came from).
func (i *Issuer) recheck(cert, tmpl *x509.Certificate, req Request) error {
	csr := req.CSR.Request

	switch {
	case !bytes.Equal(cert.RawIssuer, i.ca.Cert.RawSubject):
		return errors.New("issuer is not the CA")
	case cert.SerialNumber.Cmp(tmpl.SerialNumber) != 0:
		return fmt.Errorf("serial %x, want %x", cert.SerialNumber, tmpl.SerialNumber)
	case cert.IsCA || !cert.BasicConstraintsValid:
		return errors.New("CA flag set or basic constraints missing")
	case cert.KeyUsage != x509.KeyUsageDigitalSignature:
		return fmt.Errorf("key usage %v", cert.KeyUsage)
	case !slices.Equal(cert.ExtKeyUsage, req.Profile.extKeyUsage()) || len(cert.UnknownExtKeyUsage) > 0:
		return fmt.Errorf("extended key usage %v", cert.ExtKeyUsage)
	case cert.Subject.CommonName != csr.Subject.CommonName:
		return fmt.Errorf("common name %q, want %q", cert.Subject.CommonName, csr.Subject.CommonName)
	case !sameSet(cert.Subject.Organization, tmpl.Subject.Organization):
		return fmt.Errorf("organization %q, want %q", cert.Subject.Organization, tmpl.Subject.Organization)
	case !cert.NotBefore.Equal(tmpl.NotBefore) || !cert.NotAfter.Equal(tmpl.NotAfter):
		return fmt.Errorf("validity %s to %s", cert.NotBefore, cert.NotAfter)
	case !bytes.Equal(cert.RawSubjectPublicKeyInfo, csr.RawSubjectPublicKeyInfo):
		return errors.New("public key differs from the CSR's")
	case len(cert.EmailAddresses) > 0 || len(cert.URIs) > 0:
		return errors.New("e-mail or URI SAN present")
	case !slices.Equal(cert.DNSNames, csr.DNSNames) || !slices.EqualFunc(cert.IPAddresses, csr.IPAddresses, net.IP.Equal):
		return errors.New("SANs differ from the CSR's")
	case !bytes.Equal(cert.SubjectKeyId, tmpl.SubjectKeyId):
		return errors.New("subject key id differs")
	case !bytes.Equal(cert.AuthorityKeyId, i.ca.Cert.SubjectKeyId) && len(i.ca.Cert.SubjectKeyId) > 0:
		return errors.New("authority key id does not name the CA")
	}

	return nil
}

// sameSet compares string lists as sets: DER sorts the values of a
// multi-valued name attribute, so their order in the certificate is not the
// order they were given in.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
