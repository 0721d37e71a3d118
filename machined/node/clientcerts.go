package node

import (
	"errors"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/certapi"
)

// clientIssuer issues client credentials from the OS CA of the current
// boot's config; only control planes hold its key.
type clientIssuer struct{ n *Node }

// ClientIssuer returns an issuer of the OS CA and the accepted CAs,
// certapi.ErrNoCA on a worker, or certapi.ErrTimeNotSynced: the API serves
// before the clock is synced (see boot), but issues nothing until then.
// The API servers map these errors to the codes callers see.
func (c clientIssuer) ClientIssuer() (*ca.Issuer, []byte, error) {
	machine := c.n.config.current()
	if machine.OSCA() == nil {
		return nil, nil, certapi.ErrNoCA
	}

	if b := c.n.config.boot(); b == nil || b.time == nil || !b.time.Synced() {
		return nil, nil, certapi.ErrTimeNotSynced
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: machine.OSCA(), Clock: c.n.clock})
	if err != nil {
		return nil, nil, err
	}

	return iss, machine.AcceptedCAs().PEM(), nil
}

// IssueClientConfig issues a client certificate with roles from the OS CA
// and wraps it in a client config naming the node's addresses. The
// metrics count it: issued, refused (no CA here, clock not synced) or
// failed.
func (c clientIssuer) IssueClientConfig(roles role.Set, ttl time.Duration) (caPEM, crt, key, cfg []byte, err error) {
	caPEM, crt, key, cfg, err = c.issueClientConfig(roles, ttl)

	switch {
	case err == nil:
		c.n.clientCerts.Count(metrics.OperationGenerate, metrics.OutcomeIssued)
	case errors.Is(err, certapi.ErrNoCA), errors.Is(err, certapi.ErrTimeNotSynced):
		c.n.clientCerts.Count(metrics.OperationGenerate, metrics.OutcomeRefused)
	default:
		c.n.clientCerts.Count(metrics.OperationGenerate, metrics.OutcomeFailed)
	}

	return caPEM, crt, key, cfg, err
}

func (c clientIssuer) issueClientConfig(roles role.Set, ttl time.Duration) (caPEM, crt, key, cfg []byte, err error) {
	iss, caPEM, err := c.ClientIssuer()
	if err != nil {
		return nil, nil, nil, nil, err
	}

	cc, err := certs.NewClientCertificate(iss, certs.ClientCertOptions{Roles: roles, TTL: ttl})
	if err != nil {
		return nil, nil, nil, nil, err
	}

	res, _ := c.n.store.Current()

	cfg, err = certs.NewClientConfig(c.n.config.current().Cluster.Name, res.GetAddresses(), caPEM, cc).Marshal()
	if err != nil {
		return nil, nil, nil, nil, err
	}

	return caPEM, cc.Cert.PEM, cc.Key, cfg, nil
}
