package certapi

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// presentedRoles are the roles a renewal keeps: those of the presented
// certificate. A node's impersonator certificate renews through its node,
// never here; a certificate with no known role has nothing to keep.
func presentedRoles(presented *x509.Certificate) (role.Set, error) {
	roles, _ := role.FromOrganization(presented.Subject.Organization)

	switch {
	case roles.Has(role.Impersonator):
		return nil, errors.New("an os:impersonator certificate cannot be renewed here")
	case len(roles) == 0:
		return nil, errors.New("renewal needs a certificate with roles")
	default:
		return roles, nil
	}
}

// checkCSR parses the request and holds it to the presented certificate:
// no hosts, and the same common name (the CSR's name is the caller's to
// choose, so it must be the one the certificate already carries).
func checkCSR(unsafeCSR []byte, presented *x509.Certificate) (*ca.CSR, error) {
	csr, err := ca.ParseCSR(unsafeCSR)
	if err != nil {
		return nil, invalid{err}
	}

	if hosts := csr.Hosts(); len(hosts) > 0 {
		return nil, invalid{fmt.Errorf(
			"a client certificate names no hosts; the request names %s", strings.Join(hosts, ", "))}
	}

	if cn, want := csr.Request.Subject.CommonName, presented.Subject.CommonName; cn != want {
		return nil, invalid{fmt.Errorf("the request's common name %q is not the certificate's %q", cn, want)}
	}

	return csr, nil
}

// ttl is the lifetime to issue: what was asked, never more than the
// presented certificate's own lifetime (NotAfter-NotBefore) nor the
// configured maximum; nothing asked means the presented lifetime.
func (s *Server) ttl(req *certificates.RenewRequest, presented *x509.Certificate) (time.Duration, error) {
	asked, err := CheckTTL("ttl", req.GetTtl())
	if err != nil {
		return 0, err
	}

	limit := min(presented.NotAfter.Sub(presented.NotBefore), s.cfg.MaxTTL)
	if limit < MinTTL {
		return 0, fmt.Errorf("the presented certificate lives %s, shorter than %s", limit, MinTTL)
	}

	if asked == 0 {
		return limit, nil
	}

	return min(asked, limit), nil
}
