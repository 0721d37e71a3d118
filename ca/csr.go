package ca

import (
	"crypto"
	cryptorand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"unicode"
)

var oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}

// CSR is a certificate request that passed ParseCSR's checks. Only its public
// key, common name and SANs are ever used; everything else it asked for is
// decided by the profile that signs it.
type CSR struct {
	// PEM is the request as received.
	PEM []byte
	// Request is the parsed request, signature verified.
	Request *x509.CertificateRequest
}

// ParseCSR checks an untrusted PEM certificate request, in this order: size,
// PEM framing, DER structure, key type, self-signature, CA flag, SANs and
// common name. The first broken rule is returned as an *Error. The key type
// comes before the signature so that no signature is verified with a key
// that would be refused anyway (a huge RSA modulus costs CPU). An
// Organization (roles asked for) is not refused: the issuer never copies
// it, so the certificate simply comes without it.
func ParseCSR(unsafePEM []byte) (*CSR, error) {
	if len(unsafePEM) > MaxPEMSize {
		return nil, refuse(ReasonTooLarge, "CSR is %d bytes, limit %d", len(unsafePEM), MaxPEMSize)
	}

	block, _ := pem.Decode(unsafePEM)
	if block == nil {
		return nil, refuse(ReasonBadPEM, "no PEM block in CSR data")
	}

	if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
		return nil, refuse(ReasonBadPEM, "PEM block %q is not a certificate request", block.Type)
	}

	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonBadCSR, "%v", err)
	}

	if err = checkPublicKey(req.PublicKey); err != nil {
		return nil, err
	}

	if err = req.CheckSignature(); err != nil {
		return nil, refuse(ReasonCSRSignature, "%v", err)
	}

	for _, check := range []func(*x509.CertificateRequest) error{
		checkNoCARequest,
		checkSANs,
		func(r *x509.CertificateRequest) error { return checkCommonName(r.Subject.CommonName) },
	} {
		if err = check(req); err != nil {
			return nil, err
		}
	}

	return &CSR{PEM: unsafePEM, Request: req}, nil
}

// Hosts returns the request's DNS names and IP addresses as strings.
func (c *CSR) Hosts() []string {
	hosts := make([]string, 0, len(c.Request.DNSNames)+len(c.Request.IPAddresses))
	hosts = append(hosts, c.Request.DNSNames...)

	for _, ip := range c.Request.IPAddresses {
		hosts = append(hosts, ip.String())
	}

	return hosts
}

// NewCSR builds a PEM certificate request signed by key. Each host is put in
// the IP or DNS SANs according to its form.
func NewCSR(key crypto.Signer, commonName string, hosts []string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}

	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}

	der, err := x509.CreateCertificateRequest(cryptorand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("ca: creating CSR: %w", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

func checkNoCARequest(req *x509.CertificateRequest) error {
	for _, ext := range req.Extensions {
		if !ext.Id.Equal(oidBasicConstraints) {
			continue
		}

		var bc struct {
			IsCA       bool `asn1:"optional"`
			MaxPathLen int  `asn1:"optional,default:-1"`
		}

		rest, err := asn1.Unmarshal(ext.Value, &bc)
		if err != nil || len(rest) != 0 {
			return refuse(ReasonBadCSR, "malformed basic constraints extension")
		}

		if bc.IsCA {
			return refuse(ReasonCARequested, "basic constraints CA:TRUE")
		}
	}

	return nil
}

func checkSANs(req *x509.CertificateRequest) error {
	if n := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs); n > MaxSANs {
		return refuse(ReasonTooManySANs, "%d SANs, limit %d", n, MaxSANs)
	}

	if len(req.EmailAddresses) > 0 {
		return refuse(ReasonEmailSAN, "%q", req.EmailAddresses[0])
	}

	if len(req.URIs) > 0 {
		return refuse(ReasonURISAN, "%q", req.URIs[0].String())
	}

	for _, name := range req.DNSNames {
		if err := CheckDNSName(name); err != nil {
			return err
		}
	}

	for _, ip := range req.IPAddresses {
		if ip.IsUnspecified() || ip.IsMulticast() {
			return refuse(ReasonBadSAN, "IP address %s cannot name a host", ip)
		}
	}

	return nil
}

// CheckDNSName checks a name for a DNS SAN: no wildcard, and hostname syntax
// (letters, digits and hyphens in labels of 1 to 63 characters).
func CheckDNSName(name string) error {
	if strings.Contains(name, "*") {
		return refuse(ReasonWildcardSAN, "%q", name)
	}

	if name == "" || len(name) > MaxDNSNameLength {
		return refuse(ReasonBadSAN, "DNS name %q is empty or longer than %d", name, MaxDNSNameLength)
	}

	for label := range strings.SplitSeq(name, ".") {
		if !validLabel(label) {
			return refuse(ReasonBadSAN, "DNS name %q has invalid label %q", name, label)
		}
	}

	return nil
}

func validLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}

	for i := range len(label) {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}

	return true
}

func checkCommonName(cn string) error {
	if len(cn) > MaxCommonNameLength {
		return refuse(ReasonBadSubject, "common name is %d bytes, limit %d", len(cn), MaxCommonNameLength)
	}

	if strings.Contains(cn, "*") {
		return refuse(ReasonWildcardSAN, "common name %q", cn)
	}

	for _, r := range cn {
		if !unicode.IsPrint(r) {
			return refuse(ReasonBadSubject, "common name has unprintable character %U", r)
		}
	}

	return nil
}

// CanonicalName is the form in which Aegis compares and records a node's
// name: lower case, without a final dot. DNS names are case-insensitive,
// so two spellings of one name must never be two names.
func CanonicalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}
