package resourceapi

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/aegis-os/aegis/client/resourcetypes"

	"github.com/cosi-project/runtime/pkg/resource"
)

// Certificate is one certificate of the node, PEM, without its key.
type Certificate struct {
	// ID names the resource: "server", "impersonator", "os-ca".
	ID   resource.ID
	Kind string
	PEM  []byte
}

// SetCertificates makes CertificateStatuses hold the node's certificates
// and every accepted CA (ID "ca-" and the first 16 hex digits of its
// fingerprint), each with the fingerprint of the CA that signed it: an
// accepted CA, or a CA among the node's own (the etcd CA). Only
// certificates reach here: keys never do.
func (s *State) SetCertificates(own []Certificate, acceptedPEM []byte) error {
	cas, err := parseAll(acceptedPEM)
	if err != nil {
		return fmt.Errorf("resourceapi: accepted CAs: %w", err)
	}

	var errs []error

	parsed := map[resource.ID]*x509.Certificate{}
	issuers := cas

	for _, c := range own {
		if len(c.PEM) == 0 {
			continue
		}

		crts, err := parseAll(c.PEM)
		if err != nil || len(crts) == 0 {
			errs = append(errs, fmt.Errorf("resourceapi: certificate %s: %w", c.ID, errors.Join(err, errors.New("no certificate"))))

			continue
		}

		parsed[c.ID] = crts[0]
		if crts[0].IsCA {
			issuers = append(issuers[:len(issuers):len(issuers)], crts[0])
		}
	}

	ids := map[resource.ID]bool{}

	put := func(id resource.ID, kind string, crt *x509.Certificate) {
		ids[id] = true
		errs = append(errs, set(s, resourcetypes.NewCertificateStatus(id), func(r *resourcetypes.CertificateStatus) {
			*r.TypedSpec() = describe(kind, crt, issuers)
		}))
	}

	for _, c := range cas {
		put("ca-"+fingerprint(c)[:16], resourcetypes.CertKindAcceptedCA, c)
	}

	for _, c := range own {
		if crt, ok := parsed[c.ID]; ok {
			put(c.ID, c.Kind, crt)
		}
	}

	errs = append(errs, s.keep(resourcetypes.NamespaceName, resourcetypes.CertificateStatusType, ids))

	return errors.Join(errs...)
}

// describe is the status of crt, checked against the accepted CAs.
func describe(kind string, crt *x509.Certificate, cas []*x509.Certificate) resourcetypes.CertificateStatusSpec {
	spec := resourcetypes.CertificateStatusSpec{
		Kind: kind, Subject: crt.Subject.String(), Issuer: crt.Issuer.String(), Fingerprint: fingerprint(crt),
		NotBefore: crt.NotBefore.UTC(), NotAfter: crt.NotAfter.UTC(), DNSNames: crt.DNSNames, IsCA: crt.IsCA,
		Roles: crt.Subject.Organization,
	}

	for _, ip := range crt.IPAddresses {
		spec.IPAddresses = append(spec.IPAddresses, ip.String())
	}

	for _, ca := range cas {
		if crt.CheckSignatureFrom(ca) == nil {
			spec.IssuerFingerprint = fingerprint(ca)

			break
		}
	}

	return spec.DeepCopy()
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)

	return hex.EncodeToString(sum[:])
}

// parseAll reads every CERTIFICATE block of data; other blocks (a key
// handed over by mistake) are skipped, never parsed or kept.
func parseAll(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate

	for {
		var block *pem.Block

		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}

		if block.Type != "CERTIFICATE" {
			continue
		}

		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}

		out = append(out, c)
	}
}
