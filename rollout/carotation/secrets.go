package carotation

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
)

// checkSecrets refuses, before anything changes, a --secrets bundle that
// does not load or holds neither the CA in effect nor (a rotation in
// progress) the new one.
func (r *Rotation) checkSecrets(ctx context.Context) error {
	path := r.opts.Secrets
	if path == "" {
		return nil
	}

	b, err := certs.LoadBundle(path, r.w.Clock().Now())
	if err != nil {
		return fmt.Errorf("--secrets: %w", err)
	}

	slot := r.kind.Config.Bundled(b)
	if *slot == nil {
		return fmt.Errorf("--secrets %s holds no %s CA", path, r.kind.Name)
	}

	held, err := ca.Parse((*slot).Crt, (*slot).Key, r.w.Clock().Now())
	if err != nil {
		return fmt.Errorf("--secrets %s: %w", path, err)
	}

	cp, err := r.firstConfig(ctx)
	if err != nil {
		return err
	}

	if known := []*x509.Certificate{r.kind.Config.Issuing(cp), r.recNew(), r.recOld()}; !anyEqual(held.Cert, known) {
		return fmt.Errorf("--secrets %s holds another %s CA than the cluster's (%s)", path, r.kind.Name, held.Cert.Subject)
	}

	return nil
}

// updateSecrets puts the new CA, certificate and key as a control plane
// holds them, into the --secrets bundle.
func (r *Rotation) updateSecrets(ctx context.Context) error {
	path := r.opts.Secrets
	if path == "" {
		return nil
	}

	b, err := certs.LoadBundle(path, r.w.Clock().Now())
	if err != nil {
		return fmt.Errorf("--secrets: %w", err)
	}

	cp, err := r.firstConfig(ctx)
	if err != nil {
		return err
	}

	held := r.kind.Config.Held(cp)
	if held == nil {
		return fmt.Errorf("%s holds no CA key to put into %s", r.members[0], path)
	}

	*r.kind.Config.Bundled(b) = &certs.CertAndKey{Crt: held.CertPEM, Key: held.KeyPEM}
	if err = b.Save(path, true); err != nil {
		return err
	}

	r.w.Printf("updated %s (mode 0600): its %s CA is the new one\n", path, r.kind.Name)

	return nil
}

func anyEqual(c *x509.Certificate, among []*x509.Certificate) bool {
	for _, a := range among {
		if a != nil && a.Equal(c) {
			return true
		}
	}

	return false
}
