package main

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
func (r *rotator) checkSecrets(ctx context.Context) error {
	if r.flags.secrets == "" {
		return nil
	}

	b, err := certs.LoadBundle(r.flags.secrets, r.e.clock.Now())
	if err != nil {
		return fmt.Errorf("--secrets: %w", err)
	}

	slot := r.kind.bundled(b)
	if *slot == nil {
		return fmt.Errorf("--secrets %s holds no %s CA", r.flags.secrets, r.kind.name())
	}

	held, err := ca.Parse((*slot).Crt, (*slot).Key, r.e.clock.Now())
	if err != nil {
		return fmt.Errorf("--secrets %s: %w", r.flags.secrets, err)
	}

	cp, err := r.nodeConfig(ctx, r.members[0])
	if err != nil {
		return err
	}

	if known := []*x509.Certificate{r.kind.issuing(cp), r.recNew(), r.recOld()}; !anyEqual(held.Cert, known) {
		return fmt.Errorf("--secrets %s holds another %s CA than the cluster's (%s)", r.flags.secrets, r.kind.name(), held.Cert.Subject)
	}

	return nil
}

// updateSecrets puts the new CA, certificate and key as a control plane
// holds them, into the --secrets bundle.
func (r *rotator) updateSecrets(ctx context.Context) error {
	if r.flags.secrets == "" {
		return nil
	}

	b, err := certs.LoadBundle(r.flags.secrets, r.e.clock.Now())
	if err != nil {
		return fmt.Errorf("--secrets: %w", err)
	}

	cp, err := r.nodeConfig(ctx, r.members[0])
	if err != nil {
		return err
	}

	held := r.kind.held(cp)
	if held == nil {
		return fmt.Errorf("%s holds no CA key to put into %s", r.members[0], r.flags.secrets)
	}

	*r.kind.bundled(b) = &certs.CertAndKey{Crt: held.CertPEM, Key: held.KeyPEM}
	if err = b.Save(r.flags.secrets, true); err != nil {
		return err
	}

	fmt.Fprintf(r.out, "updated %s (mode 0600): its %s CA is the new one\n", r.flags.secrets, r.kind.name())

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
