package trustdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/wire"
)

// ErrClosed is what a call on a closed Client returns.
var ErrClosed = errors.New("trustdclient: closed")

// Config configures a Client. It is read once, by New.
type Config struct {
	// Endpoints are the control planes' trustd endpoints (host, or
	// host:port; the port defaults to wire.TrustdPort). Required, at most
	// MaxEndpoints.
	Endpoints []string
	// Certificate returns the node certificate, presented as the client
	// certificate. It is asked at every handshake, so a renewed certificate
	// is used from the next connection on. Required.
	Certificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// AcceptedCAs returns the CAs trustd's server certificate must chain
	// to. It is asked at every handshake, so a CA rotation applies from the
	// next connection on. Required.
	AcceptedCAs func() *x509.CertPool
	// Source is the local address to call from; empty lets the system
	// choose. trustd checks a node's certificate against the address it
	// calls from, so a node with a listen address calls from it.
	Source string
	// Clock is the time certificates are verified at. Nil means the
	// system clock.
	Clock clock.Clock
}

// Client calls the control planes' trustd, one endpoint after the other
// from the last that answered. It keeps one connection per endpoint: a
// poll a second and a heartbeat every few seconds are better served by one
// connection than by a handshake each time. It is safe for concurrent use.
type Client struct {
	cfg Config

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	next   int // the endpoint to ask first: the last one that answered
	closed bool
}

// New returns a Client; Close releases its connections.
func New(cfg Config) (*Client, error) {
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, errors.New("trustdclient: no control-plane endpoint")
	case len(cfg.Endpoints) > MaxEndpoints:
		return nil, fmt.Errorf("trustdclient: %d control-plane endpoints, more than %d", len(cfg.Endpoints), MaxEndpoints)
	case cfg.Certificate == nil || cfg.AcceptedCAs == nil:
		return nil, errors.New("trustdclient: a node certificate and accepted CAs are required")
	}

	if cfg.Source != "" && net.ParseIP(cfg.Source) == nil {
		return nil, fmt.Errorf("trustdclient: source %q is not an IP address", cfg.Source)
	}

	eps := make([]string, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		eps[i] = wire.WithDefaultPort(ep, wire.TrustdPort)
		if _, _, err := net.SplitHostPort(eps[i]); err != nil {
			return nil, fmt.Errorf("trustdclient: endpoint %q: %w", ep, err)
		}
	}

	cfg.Endpoints = eps
	cfg.Clock = defaults.Clock(cfg.Clock)

	return &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}}, nil
}

// Call runs call on the endpoints in turn, from the last that answered,
// until one returns nil, and returns that endpoint. When none does, the
// error joins each endpoint's.
func (c *Client) Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error) {
	c.mu.Lock()
	first := c.next
	c.mu.Unlock()

	var errs []error

	for i := range c.cfg.Endpoints {
		idx := (first + i) % len(c.cfg.Endpoints)
		ep := c.cfg.Endpoints[idx]

		conn, err := c.conn(ep)
		if err == nil {
			err = call(ctx, conn)
		}

		if err == nil {
			c.mu.Lock()
			c.next = idx
			c.mu.Unlock()

			return ep, nil
		}

		if errors.Is(err, ErrClosed) {
			return "", err
		}

		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}

	return "", errors.Join(errs...)
}

// conn is the kept connection to endpoint, made on first use.
func (c *Client) conn(endpoint string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.closed {
		return nil, ErrClosed
	}

	if conn, ok := c.conns[endpoint]; ok {
		return conn, nil
	}

	host, _, _ := net.SplitHostPort(endpoint) // checked by New

	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(&perHandshake{host: host, config: c.tlsConfig}), grpcopt.DialFrom(c.cfg.Source),
	}, grpcopt.FixedWindows()...)

	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("trustdclient: %w", err)
	}

	c.conns[endpoint] = conn

	return conn, nil
}

// tlsConfig is the config of one new connection to host.
func (c *Client) tlsConfig(host string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		ServerName:           host,
		RootCAs:              c.cfg.AcceptedCAs(),
		GetClientCertificate: c.cfg.Certificate,
		Time:                 c.cfg.Clock.Now,
	}
}

// Retry drops every kept connection that failed, so that the next call
// makes a new one at once instead of failing until gRPC's reconnect
// backoff (a second or more) ends: a node calls it once it has the
// certificate that it presents, so that a connection refused before (no
// certificate yet) does not fail its first calls.
func (c *Client) Retry() {
	c.mu.Lock()
	defer c.mu.Unlock()

	for ep, conn := range c.conns {
		if conn.GetState() == connectivity.TransientFailure {
			_ = conn.Close()

			delete(c.conns, ep)
		}
	}
}

// Close closes the kept connections; later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.closed = true

	var errs []error

	for ep, conn := range c.conns {
		errs = append(errs, conn.Close())

		delete(c.conns, ep)
	}

	return errors.Join(errs...)
}
