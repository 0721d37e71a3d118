package ca

import (
	"io"
	"slices"
	"time"

	"github.com/aegis-os/aegis/authz/role"
)

// KeyRequest is a certificate for a key the issuer's caller does not have
// yet: IssueNewKey makes the key, the CSR, and issues from it.
type KeyRequest struct {
	// CommonName and Hosts (the SANs) go into the CSR.
	CommonName string
	Hosts      []string
	// Profile decides the kind of certificate.
	Profile Profile
	// Roles go into a client certificate (Request.Roles).
	Roles role.Set
	// TTL is the lifetime asked for. Zero means the profile's default.
	TTL time.Duration
	// Rand is the source of the key. Nil means crypto/rand.
	Rand io.Reader
	// Fallback is the key type when the CA's key is of a type Aegis does
	// not generate (an RSA CA brought from elsewhere). Zero means Ed25519.
	Fallback KeyType
}

// IssueNewKey issues a certificate for a new key of the CA's key type
// (req.Fallback for a CA key Aegis does not generate) and returns it with
// the key as PEM. The key goes through a CSR and the same checks as any
// caller's: a certificate a node issues for itself obeys the rules trustd
// applies to others.
func (i *Issuer) IssueNewKey(req KeyRequest) (*Issued, []byte, error) {
	kt, err := KeyTypeOf(i.ca.Cert.PublicKey)
	if err != nil {
		kt = req.Fallback
	}

	key, err := GenerateKey(kt, req.Rand)
	if err != nil {
		return nil, nil, err
	}

	csrPEM, err := NewCSR(key, req.CommonName, req.Hosts)
	if err != nil {
		return nil, nil, err
	}

	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}

	issued, err := i.Issue(Request{CSR: csr, Profile: req.Profile, Roles: req.Roles, TTL: req.TTL})
	if err != nil {
		return nil, nil, err
	}

	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}

	return issued, keyPEM, nil
}

// ServerHosts are the SANs of a node's server certificate: its addresses,
// 127.0.0.1, its hostname (when it is a DNS name: a hostname that is not
// cannot be a SAN, and the node is then reached by address) and the
// config's certSANs, in that order, without repeats or empty names.
func ServerHosts(hostname string, addresses, certSANs []string) []string {
	var hosts []string

	for _, h := range slices.Concat(addresses, []string{"127.0.0.1", hostname}, certSANs) {
		if h == "" || slices.Contains(hosts, h) {
			continue
		}

		if h == hostname && CheckDNSName(h) != nil {
			continue
		}

		hosts = append(hosts, h)
	}

	return hosts
}
