// Package connect turns a context of the client config into a Talos
// machinery client: the endpoints and nodes it addresses (canonical, each
// once), its client certificate checked, its credentials on the
// connection. What a user is told to do about a failure is the caller's.
// The package imports no server package.
package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/routing"
)

// ErrNoEndpoints is returned by Resolve when neither the caller nor the
// context names an endpoint.
var ErrNoEndpoints = errors.New("connect: no endpoints")

// Options say which context is dialed, and where.
type Options struct {
	// Name is the context's name, used in errors. "" is allowed.
	Name string
	// Context holds the client certificate, its key and the CA that
	// verifies the endpoints. Required.
	Context *certs.ClientContext
	// Endpoints are dialed, host:port each. Required: see Resolve.
	Endpoints []string
}

// Resolve returns the endpoints and nodes to use: those given, else the
// context's. Endpoints are required (ErrNoEndpoints) and checked; no nodes
// means the endpoint's own; nodes are canonical, each once.
func Resolve(cc *certs.ClientContext, endpoints, nodes []string) ([]string, []string, error) {
	if len(endpoints) == 0 {
		endpoints = cc.Endpoints
	}

	if len(nodes) == 0 {
		nodes = cc.Nodes
	}

	if len(endpoints) == 0 {
		return nil, nil, ErrNoEndpoints
	}

	for _, a := range endpoints {
		if err := certs.CheckHostPort(a); err != nil {
			return nil, nil, err
		}
	}

	nodes, err := CanonicalNodes(nodes)
	if err != nil {
		return nil, nil, err
	}

	return endpoints, nodes, nil
}

// CanonicalNodes checks nodes as apid does, so a bad one (a port, a URL) is
// refused before anything is sent, and returns them canonical (::ffff:
// 10.0.0.1 is 10.0.0.1) and each once: the replies are then tagged with
// the names given, and a command runs once per node.
func CanonicalNodes(nodes []string) ([]string, error) {
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

// Certificate parses the context's client certificate. Whether it is
// valid now is the caller's check (renewal.CheckClientCertificateTime),
// so that it can say what to do about it.
func Certificate(name string, cc *certs.ClientContext) (*x509.Certificate, error) {
	if len(cc.Crt) == 0 {
		return nil, fmt.Errorf("context %q has no client certificate", name)
	}

	cert, err := ca.ParseCertificate(cc.Crt)
	if err != nil {
		return nil, fmt.Errorf("context %q: client certificate: %w", name, err)
	}

	return cert, nil
}

// Dial builds a client of the endpoints with the context's credentials,
// TLS 1.3 only, the endpoints verified by the context's CA. gRPC connects
// lazily: nothing goes on the wire before the first call.
func Dial(ctx context.Context, opts Options) (*client.Client, error) {
	tlsConfig, err := TLSConfig(opts.Name, opts.Context)
	if err != nil {
		return nil, err
	}

	c, err := client.New(ctx, client.WithEndpoints(opts.Endpoints...), client.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", strings.Join(opts.Endpoints, ", "), err)
	}

	return c, nil
}

// TLSConfig is the client side of the context's mTLS: its key pair, its
// CA as the only roots, TLS 1.3.
func TLSConfig(name string, cc *certs.ClientContext) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(cc.Crt, cc.Key)
	if err != nil {
		return nil, fmt.Errorf("context %q: client key pair: %w", name, err)
	}

	roots := x509.NewCertPool()
	if len(cc.CA) == 0 || !roots.AppendCertsFromPEM(cc.CA) {
		return nil, fmt.Errorf("context %q has no CA certificate to verify the endpoints with", name)
	}

	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, nil
}
