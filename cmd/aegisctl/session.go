package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/connect"
	"github.com/aegis-os/aegis/renewal"
)

// session is one node command's connection: the context it runs in, the
// endpoints it dials, the nodes it addresses and a client holding the
// context's credentials.
type session struct {
	e    *env
	path string // the client config file
	name string // the context's name
	ctx  *certs.ClientContext
	cert *x509.Certificate // the context's client certificate

	endpoints []string
	nodes     []string
	client    *client.Client
}

// withSession opens a session (renewing the client certificate first if it
// is due), runs fn and closes the session.
func (e *env) withSession(cmd *cobra.Command, fn func(ctx context.Context, s *session) error) error {
	s, err := e.openSession(cmd.Context())
	if err != nil {
		return err
	}
	defer s.close()

	if renewal.ClientRenewalDue(e.clock.Now(), s.cert) {
		s.renewOrWarn(cmd.Context())
	}

	return fn(cmd.Context(), s)
}

// openSession resolves the context, endpoints and nodes and checks the
// client certificate before anything is dialed: an expired certificate is
// reported as such, with the way out, not as a failed handshake.
func (e *env) openSession(ctx context.Context) (*session, error) {
	path, err := e.clientConfigPath()
	if err != nil {
		return nil, err
	}

	e.warnShared(path, "client config")

	cfg, err := loadClientConfig(path)
	if err != nil {
		return nil, err
	}

	s := &session{e: e, path: path}

	if s.name, s.ctx, err = pickContext(cfg, e.target.context); err != nil {
		return nil, err
	}

	if s.endpoints, s.nodes, err = e.target.resolve(s.name, s.ctx); err != nil {
		return nil, err
	}

	if err = s.loadCertificate(); err != nil {
		return nil, err
	}

	if err = s.dial(ctx); err != nil {
		return nil, err
	}

	return s, nil
}

// loadClientConfig reads the client config at path; a missing file is an
// error that says how to make one.
func loadClientConfig(path string) (*certs.ClientConfig, error) {
	cfg, err := certs.LoadClientConfig(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no client config at %s: make one with 'aegisctl gen config' or 'aegisctl cluster create', or name one with --aegisconfig", path)
	}

	return cfg, err
}

// pickContext returns the named context, or the current one; without
// one, the error says how to pick or make one.
func pickContext(cfg *certs.ClientConfig, name string) (string, *certs.ClientContext, error) {
	if name == "" {
		name, ctx, err := cfg.Current()
		if err != nil {
			return "", nil, noCurrentContext(cfg)
		}

		return name, ctx, nil
	}

	ctx, ok := cfg.Contexts[name]
	if !ok || ctx == nil {
		return "", nil, noContext(name, cfg)
	}

	return name, ctx, nil
}

// resolve returns the endpoints and nodes of a command: the flags', else
// the context's. Endpoints are required; no nodes means the endpoint's own.
func (f targetFlags) resolve(name string, ctx *certs.ClientContext) ([]string, []string, error) {
	endpoints, nodes, err := connect.Resolve(ctx, splitList(f.endpoints), splitList(f.nodes))
	if errors.Is(err, connect.ErrNoEndpoints) {
		return nil, nil, fmt.Errorf("context %q has no endpoints: give -e ADDR or set them with 'aegisctl config endpoint ADDR'", name)
	}

	return endpoints, nodes, err
}

// loadCertificate parses the context's client certificate and checks that
// it is valid now.
func (s *session) loadCertificate() error {
	cert, err := connect.Certificate(s.name, s.ctx)
	if err != nil {
		return err
	}

	s.cert = cert

	if err = renewal.CheckClientCertificateTime(s.e.clock.Now(), cert); err != nil {
		return s.certificateTimeError(err)
	}

	return nil
}

// dial builds a client of the endpoints with the context's credentials,
// replacing the session's.
func (s *session) dial(ctx context.Context) error {
	c, err := connect.Dial(ctx, connect.Options{Name: s.name, Context: s.ctx, Endpoints: s.endpoints})
	if err != nil {
		return err
	}

	if s.client != nil {
		s.client.Close() //nolint:errcheck // replaced by a client with new credentials
	}

	s.client = c

	return nil
}

func (s *session) close() {
	if s.client != nil {
		s.client.Close() //nolint:errcheck // the command is done
	}
}

// named reports whether the command addresses nodes by name, in which case
// every reply is tagged with its node and output shows a NODE column.
func (s *session) named() bool { return len(s.nodes) > 0 }

// nodeContext routes a call: to the named nodes through the endpoint
// (apid fans out and tags each reply), or to the endpoint's own node.
func (s *session) nodeContext(ctx context.Context) context.Context {
	if !s.named() {
		return ctx
	}

	return client.WithNodes(ctx, s.nodes...)
}
