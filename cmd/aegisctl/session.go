package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/routing"
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

// pickContext returns the named context, or the current one.
func pickContext(cfg *certs.ClientConfig, name string) (string, *certs.ClientContext, error) {
	if name == "" {
		return cfg.Current()
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
	endpoints, nodes := splitList(f.endpoints), splitList(f.nodes)

	if len(endpoints) == 0 {
		endpoints = ctx.Endpoints
	}

	if len(nodes) == 0 {
		nodes = ctx.Nodes
	}

	if len(endpoints) == 0 {
		return nil, nil, fmt.Errorf("context %q has no endpoints: give -e ADDR or set them with 'aegisctl config endpoint ADDR'", name)
	}

	for _, a := range endpoints {
		if err := certs.CheckHostPort(a); err != nil {
			return nil, nil, err
		}
	}

	nodes, err := canonicalNodes(nodes)
	if err != nil {
		return nil, nil, err
	}

	return endpoints, nodes, nil
}

// canonicalNodes checks nodes as apid does, so a bad one (a port, a URL) is
// refused before anything is sent, and returns them canonical (::ffff:
// 10.0.0.1 is 10.0.0.1) and each once: the replies are then tagged with
// the names given, and a command runs once per node.
func canonicalNodes(nodes []string) ([]string, error) {
	var out []string

	for _, n := range nodes {
		c, err := routing.Canonical(n)
		if err != nil {
			return nil, fmt.Errorf("bad node %q: %w", n, err)
		}

		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}

	return out, nil
}

// loadCertificate parses the context's client certificate and checks that
// it is valid now.
func (s *session) loadCertificate() error {
	if len(s.ctx.Crt) == 0 {
		return fmt.Errorf("context %q has no client certificate", s.name)
	}

	cert, err := ca.ParseCertificate(s.ctx.Crt)
	if err != nil {
		return fmt.Errorf("context %q: client certificate: %w", s.name, err)
	}

	s.cert = cert

	if err = renewal.CheckClientCertificateTime(s.e.clock.Now(), cert); err != nil {
		return s.certificateTimeError(err)
	}

	return nil
}

// dial builds a client of the endpoints with the context's credentials.
// gRPC connects lazily: nothing goes on the wire before the first call.
func (s *session) dial(ctx context.Context) error {
	pair, err := tls.X509KeyPair(s.ctx.Crt, s.ctx.Key)
	if err != nil {
		return fmt.Errorf("context %q: client key pair: %w", s.name, err)
	}

	roots := x509.NewCertPool()
	if len(s.ctx.CA) == 0 || !roots.AppendCertsFromPEM(s.ctx.CA) {
		return fmt.Errorf("context %q has no CA certificate to verify the endpoints with", s.name)
	}

	tlsConfig := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}

	c, err := client.New(ctx, client.WithEndpoints(s.endpoints...), client.WithTLSConfig(tlsConfig))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", strings.Join(s.endpoints, ", "), err)
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
