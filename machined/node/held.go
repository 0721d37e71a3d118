package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/logkey"
)

// certKind is one of the node's own certificates: what it is for, where it
// is kept, and how a held one is judged.
type certKind struct {
	name    string // "server", "impersonator": also the file names
	profile ca.Profile
	eku     x509.ExtKeyUsage
	org     []string // the Organization it must carry, exactly
	get     func(r *node.Resources) *node.KeyPair
	set     func(r *node.Resources, kp *node.KeyPair)
}

var (
	serverKind = certKind{
		name: "server", profile: ca.ProfileServer, eku: x509.ExtKeyUsageServerAuth,
		get: (*node.Resources).GetServer,
		set: func(r *node.Resources, kp *node.KeyPair) { r.Server = kp },
	}
	impersonatorKind = certKind{
		name: "impersonator", profile: ca.ProfileImpersonator, eku: x509.ExtKeyUsageClientAuth,
		org: []string{string(role.Impersonator)},
		get: (*node.Resources).GetImpersonator,
		set: func(r *node.Resources, kp *node.KeyPair) { r.Impersonator = kp },
	}
)

// usableHeld decides whether a certificate the node already holds may be
// put in use, and returns it parsed.
//
// "Valid" is judged by the host clock, although the node may not have
// synced it yet: the host clock is all there is before a sync. That is
// safe because using a held certificate grants nothing new: it was issued
// by a CA the node accepts, for this node, within its lifetime, and it must
// still chain to an accepted CA now (a CA dropped from the config drops its
// certificates with it). Serving the API with it lets an operator see why
// the node waits; what would need a trusted clock (issuing, renewing,
// signing for others) still waits for the sync. A host clock set far
// ahead makes the certificate look expired and the node waits for the sync
// as a node without certificates does; one set far back keeps an expired
// certificate in use, which the peers' own clocks then refuse.
func usableHeld(kp *node.KeyPair, kind certKind, now time.Time, accepted *ca.AcceptedSet, hosts []string) (*x509.Certificate, error) {
	if kp == nil || len(kp.GetCrt()) == 0 {
		return nil, errors.New("none held")
	}

	pair, err := tls.X509KeyPair(kp.GetCrt(), kp.GetKey())
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}

	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}

	if err = accepted.Verify(cert, kind.eku, now); err != nil {
		return nil, err
	}

	if !slices.Equal(cert.Subject.Organization, kind.org) {
		return nil, fmt.Errorf("organization %v, want %v", cert.Subject.Organization, kind.org)
	}

	for _, h := range hosts {
		if err = cert.VerifyHostname(h); err != nil {
			return nil, fmt.Errorf("not valid for %s", h)
		}
	}

	return cert, nil
}

// loadHeld reads the certificates the node kept in its state directory,
// puts the usable ones in the resources store and takes the others out,
// so that a reboot starts apid at once with what the node holds and a node
// without usable certificates waits for new ones.
func (c *certController) loadHeld() {
	for _, kind := range c.kinds() {
		kp, err := c.readHeld(kind)

		var cert *x509.Certificate
		if err == nil {
			cert, err = usableHeld(kp, kind, c.clock.Now(), c.cfg.AcceptedCAs(), c.hostsOf(kind))
		}

		switch {
		case err == nil:
			c.log.Info("using held node certificate", slog.String(logkey.Kind, kind.name), slog.Time(logkey.NotAfter, cert.NotAfter))
		case errors.Is(err, fs.ErrNotExist):
			kp = nil
		default:
			c.log.Warn("held node certificate not used", slog.String(logkey.Kind, kind.name), slog.String(logkey.Reason, err.Error()))

			kp = nil
		}

		c.store.Update(func(r *node.Resources) { kind.set(r, kp) })
	}
}

func (c *certController) readHeld(kind certKind) (*node.KeyPair, error) {
	crtPath, keyPath := c.layout.NodeCertificate(kind.name)

	crt, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, err
	}

	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}

	return &node.KeyPair{Crt: crt, Key: key}, nil
}

// keep writes a new certificate to the state directory, key first, so a
// torn pair is refused at the next boot rather than used. A failure is
// logged: the certificate is in use all the same, and the next boot waits
// for a new one.
func (c *certController) keep(kind certKind, kp *node.KeyPair) {
	crtPath, keyPath := c.layout.NodeCertificate(kind.name)

	err := atomicfile.Write(keyPath, kp.GetKey(), 0o600, atomicfile.Options{Overwrite: true})
	if err == nil {
		err = atomicfile.Write(crtPath, kp.GetCrt(), 0o600, atomicfile.Options{Overwrite: true})
	}

	if err != nil {
		c.log.Error("keeping the node certificate", slog.String(logkey.Kind, kind.name), slog.String(logkey.Error, err.Error()))
	}
}

// publish keeps a new certificate for the next boot and puts it in use.
func (c *certController) publish(kind certKind, kp *node.KeyPair, also func(r *node.Resources)) {
	c.keep(kind, kp)
	c.store.Update(func(r *node.Resources) {
		kind.set(r, kp)

		if also != nil {
			also(r)
		}
	})
}

// held returns the certificate of kind in use, if it is still usable.
func (c *certController) held(kind certKind) *x509.Certificate {
	res, _ := c.store.Current()

	// The config in effect: a rotation changes the accepted CAs live.
	cert, err := usableHeld(kind.get(res), kind, c.clock.Now(), c.config().AcceptedCAs(), c.hostsOf(kind))
	if err != nil {
		return nil
	}

	return cert
}

// hostsOf is what a held certificate of kind must be valid for to be used:
// a control plane's server certificate every name it would be issued for
// (a config that gained a certSAN gets a new one), a worker's the node's
// addresses and its name (trustd decides which other names a worker
// gets). A worker holding a certificate from before names were proven
// joins again at boot for one that carries its name: its heartbeats are
// refused without it.
func (c *certController) hostsOf(kind certKind) []string {
	switch {
	case kind.name != serverKind.name:
		return nil
	case c.cfg.OSCA() != nil:
		return c.hosts
	default:
		return slices.Concat(c.addresses, c.ownName())
	}
}

// kinds are the certificates the node holds: a control plane its server
// and impersonator certificates, a worker its server certificate.
func (c *certController) kinds() []certKind {
	if c.cfg.OSCA() != nil {
		return []certKind{serverKind, impersonatorKind}
	}

	return []certKind{serverKind}
}
