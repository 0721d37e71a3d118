package ca

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	cfcsr "github.com/cloudflare/cfssl/csr"
	cflog "github.com/cloudflare/cfssl/log"
	"github.com/cloudflare/cfssl/signer"
	"github.com/cloudflare/cfssl/signer/local"

	"github.com/aegis-os/aegis/authz/role"
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
	ca     *CA
	signer *local.Signer
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
}

// Issued is a signed certificate.
type Issued struct {
	Cert *x509.Certificate
	PEM  []byte
}

// quietCfssl lowers cfssl's log level, a global of that library. cfssl logs
// every signature through the standard logger, unstructured; the issuer's
// callers keep their own audit records, so only its errors are wanted. It
// runs when the first issuer is built rather than when the package is
// imported, and before that issuer's signer exists, so no signing goroutine
// races with the write.
var quietCfssl sync.Once

// NewIssuer builds an Issuer around cfg.CA.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	if cfg.CA == nil || cfg.CA.Cert == nil || cfg.CA.Key == nil {
		return nil, errors.New("ca: issuer needs a CA with certificate and key")
	}

	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}

	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}

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

	quietCfssl.Do(func() { cflog.Level = cflog.LevelError })

	s, err := local.NewSigner(cfg.CA.Key, cfg.CA.Cert, signer.DefaultSigAlgo(cfg.CA.Key), cfsslPolicy())
	if err != nil {
		return nil, fmt.Errorf("ca: building signer: %w", err)
	}

	return &Issuer{ca: cfg.CA, signer: s, maxTTL: maxTTL, clock: cfg.Clock, rand: cfg.Rand}, nil
}

// CA returns the issuing CA.
func (i *Issuer) CA() *CA { return i.ca }

// Issue signs req. The steps run in a fixed order: decide the profile's
// fields, decide the validity window, sign through cfssl, and re-check the
// result against what was decided, so a surprise in the signing layer never
// leaves the issuer as a valid certificate.
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

	subject := &signer.Subject{CN: req.CSR.Request.Subject.CommonName}
	for _, o := range org {
		subject.Names = append(subject.Names, cfcsr.Name{O: o})
	}

	certPEM, err := i.signer.Sign(signer.SignRequest{
		Request:   string(req.CSR.PEM),
		Profile:   string(req.Profile),
		Subject:   subject,
		Serial:    serial,
		NotBefore: notBefore,
		NotAfter:  notAfter,
	})
	if err != nil {
		return nil, fmt.Errorf("ca: signing: %w", err)
	}

	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("ca: reading signed certificate: %w", err)
	}

	if err = i.recheck(cert, req, org, notBefore, notAfter); err != nil {
		return nil, fmt.Errorf("ca: signed certificate failed re-check: %w", err)
	}

	return &Issued{Cert: cert, PEM: certPEM}, nil
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

func (i *Issuer) recheck(cert *x509.Certificate, req Request, org []string, notBefore, notAfter time.Time) error {
	csr := req.CSR.Request

	switch {
	case !bytes.Equal(cert.RawIssuer, i.ca.Cert.RawSubject):
		return errors.New("issuer is not the CA")
	case cert.IsCA || !cert.BasicConstraintsValid:
		return errors.New("CA flag set or basic constraints missing")
	case cert.KeyUsage != x509.KeyUsageDigitalSignature:
		return fmt.Errorf("key usage %v", cert.KeyUsage)
	case !slices.Equal(cert.ExtKeyUsage, req.Profile.extKeyUsage()) || len(cert.UnknownExtKeyUsage) > 0:
		return fmt.Errorf("extended key usage %v", cert.ExtKeyUsage)
	case !sameSet(cert.Subject.Organization, org):
		return fmt.Errorf("organization %q, want %q", cert.Subject.Organization, org)
	case !cert.NotBefore.Equal(notBefore) || !cert.NotAfter.Equal(notAfter):
		return fmt.Errorf("validity %s to %s", cert.NotBefore, cert.NotAfter)
	case !publicKeysEqual(cert.PublicKey, csr.PublicKey):
		return errors.New("public key differs from the CSR's")
	case len(cert.EmailAddresses) > 0 || len(cert.URIs) > 0:
		return errors.New("e-mail or URI SAN present")
	case !slices.Equal(cert.DNSNames, csr.DNSNames) || !slices.EqualFunc(cert.IPAddresses, csr.IPAddresses, net.IP.Equal):
		return errors.New("SANs differ from the CSR's")
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
