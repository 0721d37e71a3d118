package trustdclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/client/spread"
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
	// certificate. It is asked before every call and at every handshake:
	// a kept connection made with another certificate is replaced, so a
	// renewed certificate is used from the next call on. It should be
	// cheap. Required.
	Certificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// AcceptedCAs returns the CAs trustd's server certificate must chain
	// to. It is asked at every handshake, so a CA rotation applies from the
	// next connection on. Required.
	AcceptedCAs func() *x509.CertPool
	// Source is the local address to call from; empty lets the system
	// choose. trustd checks a node's certificate against the address it
	// calls from, so a node with a listen address calls from it.
	Source string
	// Identity names the node for the choice of the control plane it
	// prefers (see Client). Empty means Source; when both are empty, an
	// identity drawn from Rand by New: nodes still spread, but one may
	// prefer another control plane after a restart.
	Identity string
	// Clock is the time certificates are verified at, and times the
	// probes of a failed endpoint. Nil means the system clock.
	Clock clock.Clock
	// Rand jitters the probes of a failed endpoint. Nil means
	// crypto/rand.
	Rand io.Reader
}

// Client calls the control planes' trustd. Each node prefers one control
// plane, chosen by rendezvous hashing of its identity over the endpoints,
// so that a cluster's workers spread evenly over its control planes; then
// the others, in an order of the same hash. An endpoint that fails is
// tried after the others until ProbeInterval (jittered) has passed, twice
// that after a second failure in a row, and so on up to MaxProbeInterval;
// then the next call probes it first again, so a node goes back to its own
// control plane once that answers, nodes that lost one at the same moment
// come back to it spread over the interval, and a control plane that
// keeps failing is sent ever fewer handshakes. It keeps one connection:
// a revocation watch held open and a heartbeat every few seconds are
// better served by one connection than by a handshake each time, and a
// control plane holds one per node, not one per node that ever tried it.
// Once an endpoint answers a call, the connections to the others are
// retired. A call may be a stream held as long as it runs (the watch):
// Call returns when it ends.
//
// A kept connection stays authenticated by the certificate presented when
// it was made, so once the node's certificate changes (a renewal, a CA
// rotation's re-issue) the connection is replaced: trustd refuses every
// call on one authenticated by a certificate of a CA it has dropped, or a
// certificate that has expired or was revoked. A connection retired
// (replaced, or to an endpoint the node moved from) is closed when its
// last call ends, or RetireGrace after it was retired: a call under way
// ends well, while a stream held open (the watch) is cut then and Call
// runs it again, from the top of the node's order, on the connection now
// kept. It is safe for concurrent use.
type Client struct {
	cfg Config

	// order is the endpoints' indexes, the preferred first (preference).
	order []int
	// ready waits for a probe's connection (connected, in client.go's
	// tests a fake).
	ready func(context.Context, *kept) error

	mu    sync.Mutex
	conns map[string]*kept
	// retryAt is, by endpoint index, when an endpoint that failed is
	// probed again; zero while it answers. failures counts, by endpoint
	// index, its failures since it last answered. slowSince is, by
	// endpoint index, when its calls began to be answered too late, or
	// refused as unavailable for now, on a connection that is up
	// (SlowFor); zero while it answers.
	retryAt   []time.Time
	failures  []int
	slowSince []time.Time
	closed    bool
	// done is closed by Close: the waits of retired connections end.
	done chan struct{}
}

// kept is a connection to one endpoint and what it was made with.
type kept struct {
	conn *grpc.ClientConn
	// handshake is when the latest TLS handshake on conn began (Unix
	// nanoseconds, zero before the first): TCP had connected by then.
	handshake atomic.Int64
	// credential is the certificate (DER) the node presented when the
	// connection was made.
	credential []byte
	calls      int  // calls under way on conn
	retired    bool // replaced: closed when its last call ends, or at RetireGrace
	closed     bool // conn was closed
	cut        bool // closed at RetireGrace with calls under way
	// transports are the local addresses of conn's open transports (gRPC
	// makes a new one when one breaks): Open.
	transports transports
}

// errMoved is what a call cut by its connection's retirement returns to
// Call, which runs it again on the connection now kept.
var errMoved = errors.New("trustdclient: connection retired under the call")

// Lost is an error that says whether the endpoint had accepted the call
// and then lost it (a stream held open that broke with its connection,
// or that the control plane ended as it stopped). A call returns such an
// error (errors.As finds it) so that Call records the endpoint's failure
// and returns at once instead of trying the next endpoint: every node of a
// control plane that fails loses its stream in the same instant, and were
// each to move at once, the control planes left would be sent their
// handshakes all at once too. The caller waits a jittered moment of its
// own before it calls again (the revocation watch, WatchMoveSpread). It is
// an interface, as net.Error is, so that a caller's package need not
// import this one.
type Lost interface {
	error
	EndpointLost() bool
}

// IsLost reports whether err, or an error it wraps, says that its endpoint
// was lost under the call (Lost).
func IsLost(err error) bool {
	var l Lost

	return errors.As(err, &l) && l.EndpointLost()
}

// maxMoves bounds how often Call runs one call again after its connection
// was retired under it: a renewal and a move to another endpoint at once
// are two; more would be a loop.
const maxMoves = 3

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
	cfg.Rand = defaults.Rand(cfg.Rand)

	identity, err := identityOf(cfg)
	if err != nil {
		return nil, err
	}

	return &Client{
		cfg: cfg, order: spread.Preference(identity, eps), ready: connected,
		conns: map[string]*kept{}, retryAt: make([]time.Time, len(eps)), failures: make([]int, len(eps)),
		slowSince: make([]time.Time, len(eps)),
		done:      make(chan struct{}),
	}, nil
}

// identityOf is what the node's preferred endpoint is hashed from.
func identityOf(cfg Config) ([]byte, error) {
	switch {
	case cfg.Identity != "":
		return []byte(cfg.Identity), nil
	case cfg.Source != "":
		return []byte(cfg.Source), nil
	}

	id := make([]byte, 16)
	if _, err := io.ReadFull(cfg.Rand, id); err != nil {
		return nil, fmt.Errorf("trustdclient: drawing an identity: %w", err)
	}

	return id, nil
}

// Call runs call on the endpoints in the node's order (see Client) until
// one returns nil, and returns that endpoint. When none does, the error
// joins each endpoint's. A call cut because its connection was retired
// (see Client) runs again, from the top of the order; one whose endpoint
// was lost under it (Lost) is not run on the next endpoint: Call returns
// its error, and the endpoint goes after the others from the next call on.
// Nor is one that its endpoint, its connection up, answered too late
// (DeadlineExceeded, the call's own deadline) or refused as unavailable
// for now (Unavailable, sent by the control plane itself), until that
// endpoint has been so for SlowFor: Call returns its error, and the node
// stays.
func (c *Client) Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error) {
	for moves := 0; ; moves++ {
		ep, err := c.callOnce(ctx, call)
		if !errors.Is(err, errMoved) || moves == maxMoves || ctx.Err() != nil {
			return ep, err
		}
	}
}

// callOnce runs call on the endpoints of one plan; it stops at errMoved.
func (c *Client) callOnce(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error) {
	var errs []error

	for _, t := range c.plan() {
		ep := c.cfg.Endpoints[t.index]

		busy, err := c.try(ctx, t, call)
		if err == nil {
			c.answered(t.index)

			return ep, nil
		}

		if errors.Is(err, ErrClosed) || errors.Is(err, errMoved) {
			return "", err
		}

		errs = append(errs, fmt.Errorf("%s: %w", ep, err))

		switch {
		case ctx.Err() != nil:
			// A caller that gave up says nothing of the endpoint.
		case busy && c.slow(t.index):
			// Up and busy: the node stays (SlowFor).
			return "", errors.Join(errs...)
		default:
			c.failed(t.index)
		}

		if IsLost(err) {
			break
		}
	}

	return "", errors.Join(errs...)
}

// try runs call on one endpoint of a plan, and says whether a call that
// failed says the endpoint is up but busy (never a probe's): its kept
// connection is up, and the call either passed its deadline or was
// refused by the control plane itself as unavailable for now. A probe
// of an endpoint that failed is made on a fresh connection, so one that
// came back is not missed for gRPC's reconnect backoff, and the call runs
// only once that connection is up (connected): a control plane that does
// not answer yet costs a call little, while the call itself, which may be
// a stream held open (the revocation watch), keeps the caller's context. A
// probe that fails closes its connection.
func (c *Client) try(ctx context.Context, t attempt, call func(context.Context, grpc.ClientConnInterface) error) (busy bool, err error) {
	endpoint := c.cfg.Endpoints[t.index]

	k, err := c.acquire(endpoint, t.probe)
	if err != nil {
		return false, err
	}
	defer c.release(k)

	if t.probe {
		if err := c.ready(ctx, k); err != nil {
			c.drop(endpoint, k)

			return false, err
		}
	}

	actx, answered := withAnswer(ctx)

	err = call(actx, k.conn)
	if err != nil && c.wasCut(k) {
		return false, fmt.Errorf("%w: %w", errMoved, err)
	}

	if err == nil || t.probe || k.conn.GetState() != connectivity.Ready {
		return false, err
	}

	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return true, err
	case codes.Unavailable:
		return answered.answered.Load(), err
	}

	return false, err
}

// wasCut reports whether k was closed under its calls at RetireGrace.
func (c *Client) wasCut(k *kept) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	return k.cut
}

// acquire returns the kept connection to endpoint for one call, made on
// first use and again when the node's certificate has changed since (or,
// when fresh, when the kept one failed); release must follow the call.
func (c *Client) acquire(endpoint string, fresh bool) (*kept, error) {
	cred := c.credential()

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.closed {
		return nil, ErrClosed
	}

	k, ok := c.conns[endpoint]
	if ok && (!bytes.Equal(k.credential, cred) || fresh && k.conn.GetState() == connectivity.TransientFailure) {
		delete(c.conns, endpoint)
		c.retireLocked(k)

		ok = false
	}

	if !ok {
		k = &kept{credential: cred}

		conn, err := c.dial(endpoint, k)
		if err != nil {
			return nil, err
		}

		k.conn = conn
		c.conns[endpoint] = k
	}

	k.calls++

	return k, nil
}

// release ends one call on k, closing k if it was retired meanwhile.
func (c *Client) release(k *kept) {
	c.mu.Lock()
	defer c.mu.Unlock()

	k.calls--
	if k.retired && k.calls == 0 {
		k.closeLocked()
	}
}

// drop retires k, the connection to endpoint, unless it was replaced
// meanwhile.
func (c *Client) drop(endpoint string, k *kept) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.conns[endpoint] == k {
		delete(c.conns, endpoint)
		c.retireLocked(k)
	}
}

// retireLocked closes k now, or when its last call ends, or RetireGrace
// from now, whichever comes first.
func (c *Client) retireLocked(k *kept) {
	if k.retired {
		return
	}

	k.retired = true
	if k.calls == 0 {
		k.closeLocked()

		return
	}

	grace := c.cfg.Clock.NewTimer(RetireGrace)

	go func() {
		defer grace.Stop()

		select {
		case <-grace.C():
		case <-c.done:
			return
		}

		c.mu.Lock()
		defer c.mu.Unlock()

		if !k.closed {
			k.cut = true
			k.closeLocked()
		}
	}()
}

// retireOthersLocked retires the kept connections to every endpoint but
// the one that answered.
func (c *Client) retireOthersLocked(answered string) {
	for ep, k := range c.conns {
		if ep != answered {
			delete(c.conns, ep)
			c.retireLocked(k)
		}
	}
}

// closeLocked closes k's connection once.
func (k *kept) closeLocked() {
	if !k.closed {
		k.closed = true
		_ = k.conn.Close()
	}
}

// credential is the certificate the node would present now, or nil.
func (c *Client) credential() []byte {
	cert, err := c.cfg.Certificate(&tls.CertificateRequestInfo{})
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return nil
	}

	return cert.Certificate[0]
}

// dial makes k's connection to endpoint; gRPC connects on first use.
func (c *Client) dial(endpoint string, k *kept) (*grpc.ClientConn, error) {
	host, _, _ := net.SplitHostPort(endpoint) // checked by New
	began := func() { k.handshake.Store(time.Now().UnixNano()) }

	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(&perHandshake{host: host, config: c.tlsConfig, began: began}), grpcopt.DialFrom(c.cfg.Source),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpcopt.NoReadBuffer(), grpcopt.SmallWriteBuffer(), grpc.WithStatsHandler(answerStats{}), grpc.WithStatsHandler(&k.transports),
	}, grpcopt.FixedWindows()...)

	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("trustdclient: %w", err)
	}

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

// Open reports whether the connection a call to endpoint went over, named
// by its local address (grpc.Peer's LocalAddr), is still open and still
// the one the Client keeps for endpoint with the node's current
// certificate: what a control plane holds for as long as that connection
// stays open (a worker's membership entry) is still held.
func (c *Client) Open(endpoint, local string) bool {
	cred := c.credential()

	c.mu.Lock()
	k, ok := c.conns[endpoint]
	c.mu.Unlock()

	return ok && bytes.Equal(k.credential, cred) && k.transports.isOpen(local)
}

// Retry drops every kept connection that failed, so that the next call
// makes a new one at once instead of failing until gRPC's reconnect
// backoff (a second or more) ends: a node calls it once it has the
// certificate that it presents, so that a connection refused before (no
// certificate yet) does not fail its first calls.
func (c *Client) Retry() {
	c.mu.Lock()
	defer c.mu.Unlock()

	for ep, k := range c.conns {
		if k.conn.GetState() == connectivity.TransientFailure {
			delete(c.conns, ep)
			c.retireLocked(k)
		}
	}
}

// Close closes the kept connections; later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if !c.closed {
		close(c.done)
	}

	c.closed = true

	var errs []error

	for ep, k := range c.conns {
		k.retired, k.closed = true, true
		errs = append(errs, k.conn.Close())

		delete(c.conns, ep)
	}

	return errors.Join(errs...)
}
