package revocation

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/wire"
)

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Endpoints are the control planes' trustd endpoints (host, or
	// host:port; the port defaults to wire.TrustdPort). Required.
	Endpoints []string
	// TLS returns the client config for a connection to host: the node's
	// certificate to present and the CAs the control plane's server
	// certificate must chain to. It is asked at every handshake, so
	// renewals and rotations apply. Required.
	TLS func(host string) (*tls.Config, error)
	// Source is the local address to call from; empty lets the system
	// choose.
	Source string
	// List receives what a control plane answers. Required.
	List *List
	// Clock paces the polls. Nil means the system clock.
	Clock clock.Clock
	// Logger receives the changes of reachability. Nil discards.
	Logger *slog.Logger
}

// Poller keeps a worker's list in step with the control planes': it asks
// their trustd every PollInterval, one endpoint after the other until one
// answers. It fails safe: while no control plane answers the list stays as
// it was (and on disk), so apid keeps refusing what it refused.
type Poller struct {
	cfg   PollerConfig
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	next  int  // the endpoint to ask first: the last one that answered
	down  bool // no control plane answered at the last poll
}

// NewPoller returns a Poller; Run starts it.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if len(cfg.Endpoints) == 0 || cfg.TLS == nil || cfg.List == nil {
		return nil, errors.New("revocation: a poller needs endpoints, a TLS config and a list")
	}

	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}

	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	eps := make([]string, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		eps[i] = wire.WithDefaultPort(ep, wire.TrustdPort)
	}

	cfg.Endpoints = eps

	return &Poller{cfg: cfg, conns: map[string]*grpc.ClientConn{}}, nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	defer p.close()

	for {
		p.PollOnce(ctx)

		if !clock.Sleep(ctx, p.cfg.Clock, PollInterval) {
			return
		}
	}
}

// PollOnce asks the endpoints in turn until one answers, and makes its
// answer the list. It reports whether one answered.
func (p *Poller) PollOnce(ctx context.Context) bool {
	var errs []error

	for i := range p.cfg.Endpoints {
		idx := (p.next + i) % len(p.cfg.Endpoints)

		entries, err := p.ask(ctx, p.cfg.Endpoints[idx])
		if err != nil {
			errs = append(errs, err)

			continue
		}

		p.next = idx
		if p.down {
			p.down = false
			p.cfg.Logger.Info("revocation list reachable again", slog.String(logkey.Endpoint, p.cfg.Endpoints[idx]))
		}

		if changed, err := p.cfg.List.Replace(entries); err != nil {
			p.cfg.Logger.Error("revocation list not kept", slog.String(logkey.Error, err.Error()))
		} else if changed {
			p.cfg.Logger.Info("revocation list updated", slog.Int(logkey.Revoked, len(entries)))
		}

		return true
	}

	if !p.down && ctx.Err() == nil {
		p.down = true
		p.cfg.Logger.Warn("no control plane answered for the revocation list; enforcing the last one",
			slog.String(logkey.Error, errors.Join(errs...).Error()))
	}

	return false
}

func (p *Poller) ask(ctx context.Context, endpoint string) ([]Entry, error) {
	conn, err := p.conn(endpoint)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, PollTimeout)
	defer cancel()

	resp, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}

	if len(resp.GetRevocations()) > MaxEntries {
		return nil, fmt.Errorf("%s: %d revocations, more than %d", endpoint, len(resp.GetRevocations()), MaxEntries)
	}

	out := make([]Entry, 0, len(resp.GetRevocations()))

	for _, r := range resp.GetRevocations() {
		e, err := FromProto(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", endpoint, err)
		}

		out = append(out, e)
	}

	return out, nil
}

// conn is the kept connection to endpoint: a poll a second is better
// served by one connection than by a handshake each time.
func (p *Poller) conn(endpoint string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if c, ok := p.conns[endpoint]; ok {
		return c, nil
	}

	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("revocation: endpoint %q: %w", endpoint, err)
	}

	opts := []grpc.DialOption{grpc.WithTransportCredentials(&perHandshake{host: host, tls: p.cfg.TLS})}

	if p.cfg.Source != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(p.cfg.Source)}}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	}

	c, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}

	p.conns[endpoint] = c

	return c, nil
}

func (p *Poller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()

	for ep, c := range p.conns {
		_ = c.Close()

		delete(p.conns, ep)
	}
}

// perHandshake builds the TLS config of each connection when it is made.
type perHandshake struct {
	credentials.TransportCredentials

	host string
	tls  func(host string) (*tls.Config, error)
}

func (c *perHandshake) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := c.tls(c.host)
	if err != nil {
		return nil, nil, err
	}

	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (c *perHandshake) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3"}
}

func (c *perHandshake) Clone() credentials.TransportCredentials {
	return &perHandshake{host: c.host, tls: c.tls}
}

func (c *perHandshake) OverrideServerName(string) error { return nil }
