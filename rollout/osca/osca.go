// Package osca is the OS CA as a CA rotation changes it: machine.ca and
// machine.acceptedCAs of every member. The client config and the nodes'
// API certificates come from it.
package osca

import (
	"crypto/x509"
	"slices"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout/carotation"
)

// Kind is the OS CA's kind of rotation. It adds no check of its own: the
// OS CA in effect is the config's, which the steps check, and steps 2 and
// 3 check the client config on every member.
func Kind() carotation.Kind {
	return carotation.Kind{Name: "os", ClientFollows: true, Config: Config{}}
}

// Config is where a machine config keeps the OS CA.
type Config struct{}

// Issuing is the config's own CA.
func (Config) Issuing(cfg *certs.MachineConfig) *x509.Certificate { return cfg.CACertificate() }

// Accepts reports whether the config accepts cert.
func (Config) Accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool {
	return cfg.AcceptedCAs() != nil && cfg.AcceptedCAs().Contains(cert)
}

// Held is a control plane's CA with its key.
func (Config) Held(cfg *certs.MachineConfig) *ca.CA { return cfg.OSCA() }

// Bundled is the bundle's OS CA.
func (Config) Bundled(b *certs.Bundle) **certs.CertAndKey { return &b.Certs.OS }

// Edit reads the raw fields, not the parsed forms, which an earlier edit
// of the same config has made stale.
func (c Config) Edit(cfg *certs.MachineConfig, e carotation.Edit) {
	switch e.Change {
	case carotation.Accept:
		accept(cfg, e.New.Cert)
	case carotation.Issue:
		issueFrom(cfg, e.New, e.Old)
	case carotation.Drop:
		drop(cfg, e.Old)
	case carotation.Revert:
		revert(cfg, e.Old, e.New.Cert)
	}
}

func accept(cfg *certs.MachineConfig, newCA *x509.Certificate) {
	listed := slices.ContainsFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return carotation.SamePEM(a.Crt, newCA) })
	if !listed && !carotation.SamePEM(cfg.Machine.CA.Crt, newCA) {
		cfg.Machine.AcceptedCAs = append(cfg.Machine.AcceptedCAs, certs.CertAndKey{Crt: ca.EncodeCertificate(newCA)})
	}
}

// issueFrom makes newCA the config's own, old staying accepted; a control
// plane gets its key.
func issueFrom(cfg *certs.MachineConfig, newCA *ca.CA, old *x509.Certificate) {
	if carotation.SamePEM(cfg.Machine.CA.Crt, newCA.Cert) {
		return
	}

	pair := certs.CertAndKey{Crt: newCA.CertPEM}
	if cfg.Machine.Type.IsControlPlane() {
		pair.Key = newCA.KeyPEM
	}

	cfg.Machine.CA = pair
	cfg.Machine.AcceptedCAs = slices.DeleteFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return carotation.SamePEM(a.Crt, newCA.Cert) })
	cfg.Machine.AcceptedCAs = append(cfg.Machine.AcceptedCAs, certs.CertAndKey{Crt: ca.EncodeCertificate(old)})
}

// revert undoes issueFrom on a worker, newCA staying accepted.
func revert(cfg *certs.MachineConfig, old, newCA *x509.Certificate) {
	if cfg.Machine.Type.IsControlPlane() || !carotation.SamePEM(cfg.Machine.CA.Crt, newCA) {
		return
	}

	cfg.Machine.CA = certs.CertAndKey{Crt: ca.EncodeCertificate(old)}
	drop(cfg, old)
	accept(cfg, newCA)
}

func drop(cfg *certs.MachineConfig, cert *x509.Certificate) {
	cfg.Machine.AcceptedCAs = slices.DeleteFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return carotation.SamePEM(a.Crt, cert) })
}
