package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/renewal"
)

func newConfigRenewCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "renew",
		Short: "Renew the context's client certificate now",
		Long: `Renew the client certificate of the current context (or --context): make a
new key, have a control-plane endpoint sign it with the same roles and the
same lifetime as the current certificate (at most what the node allows), and
rewrite the client config atomically. The new certificate must chain to the
CAs the context already trusts; those CAs never change on a renewal (only a
CA rotation changes them). Other contexts are left alone; if anything fails,
the old credentials stay.

Node commands do this by themselves once less than a third of the
certificate's lifetime is left.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := e.openSession(cmd.Context())
			if err != nil {
				return err
			}
			defer s.close()

			old := s.cert

			cert, err := s.renew(cmd.Context())
			if err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "renewed the client certificate of context %q: roles %s, valid until %s (was %s)\n",
				s.name, strings.Join(cert.Subject.Organization, ","), expiry(cert, e.clock.Now()), expiry(old, e.clock.Now()))

			return nil
		},
	}
}

// renewOrWarn renews the client certificate, or says why it could not and
// goes on with the old one, which is still valid.
func (s *session) renewOrWarn(ctx context.Context) {
	if _, err := s.renew(ctx); err != nil {
		fmt.Fprintf(s.e.stderr, "warning: could not renew the client certificate of context %q (valid until %s): %v\n",
			s.name, expiry(s.cert, s.e.clock.Now()), err)
	}
}

// renew trades the session's client certificate for a new one from the
// endpoint's own node, saves it in the context and dials again with it.
// The client config is only written once the new certificate has been
// checked; on any error the old credentials stay in place.
func (s *session) renew(ctx context.Context) (*x509.Certificate, error) {
	r, err := renewal.NewClientRenewal(s.cert, nil)
	if err != nil {
		return nil, err
	}

	callCtx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()

	// No node metadata: the endpoint's own node signs, and the context's
	// endpoints are its control planes.
	resp, err := certificates.NewCertificateServiceClient(s.client.Conn()).Renew(callCtx,
		&certificates.RenewRequest{Csr: r.CSR, Ttl: durationpb.New(r.TTL)})
	if err != nil {
		return nil, s.explain(err)
	}

	if len(resp.GetMessages()) != 1 {
		return nil, fmt.Errorf("renewal: %d certificates in the reply, want 1", len(resp.GetMessages()))
	}

	msg := resp.GetMessages()[0]
	if f := failureOf(msg.GetMetadata()); f != nil {
		return nil, errors.New(f.text)
	}

	// The reply's CA bundle is not read: the new certificate must chain to
	// the CAs the context already trusts, and those stay as they are.
	cert, err := r.Check(msg.GetCrt(), s.ctx.CA, s.e.clock.Now())
	if err != nil {
		return nil, err
	}

	// The file as it is on disk now, with only this context's credentials
	// replaced.
	saved, err := certs.ReplaceCredentialsInFile(s.path, s.name, s.ctx.Crt, msg.GetCrt(), r.KeyPEM())
	if err != nil {
		return nil, err
	}

	s.ctx, s.cert = saved, cert

	return cert, s.dial(ctx)
}
