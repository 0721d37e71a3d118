// Package flood holds connections open against a server from one source
// address, the way an attacker holding a server's slots would: TLS
// connections that finish the handshake and send the HTTP/2 preface but no
// call, TCP connections that never send a ClientHello, and connections
// stuck halfway through one. It is for tests and benchmarks against
// loopback addresses; every flood is bounded in connections and ends with
// Stop.
package flood

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// Kind is a kind of connection a flood holds.
type Kind int

// Kinds of connection.
const (
	// Idle finishes the TLS handshake and sends the HTTP/2 preface and
	// SETTINGS, then nothing.
	Idle Kind = iota
	// Silent connects over TCP and sends nothing.
	Silent
	// HalfHello sends the first part of a ClientHello and then nothing.
	HalfHello
	kinds
)

// Config configures a flood.
type Config struct {
	// Target is the server's host:port.
	Target string
	// Source is the local address every connection is made from; empty
	// lets the system choose.
	Source string
	// TLS is the client config of Idle connections; required when Idle > 0.
	TLS *tls.Config
	// Idle, Silent and HalfHello are how many connections of each kind
	// the flood keeps open: each one closed by the server is made again
	// after Redial.
	Idle, Silent, HalfHello int
	// Redial is the pause before a connection is made again; zero means a
	// second. It bounds the flood's rate at about the connections per
	// Redial.
	Redial time.Duration
	// DialTimeout bounds one connection attempt (TCP and TLS); zero means
	// five seconds.
	DialTimeout time.Duration
}

// Counts is what a flood saw of one kind of connection.
type Counts struct {
	// Open is how many connections are open now (established, handshake
	// done for Idle, not yet closed by the server).
	Open int64
	// Made counts the connections established (TCP, and TLS for Idle).
	Made int64
	// Failed counts attempts that failed before that: refused, timed
	// out, or closed by the server during the handshake.
	Failed int64
	// Closed counts established connections the server closed.
	Closed int64
}

// Flood is a running flood.
type Flood struct {
	cfg    Config
	cancel context.CancelFunc
	wg     sync.WaitGroup
	counts [kinds]struct{ open, made, failed, closed atomic.Int64 }
}

// Start starts the flood's workers, one per connection held, until Stop or
// the end of ctx.
func Start(ctx context.Context, cfg Config) *Flood {
	if cfg.Redial == 0 {
		cfg.Redial = time.Second
	}

	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}

	ctx, cancel := context.WithCancel(ctx)
	f := &Flood{cfg: cfg, cancel: cancel}

	for kind, n := range map[Kind]int{Idle: cfg.Idle, Silent: cfg.Silent, HalfHello: cfg.HalfHello} {
		for range n {
			f.wg.Go(func() { f.hold(ctx, kind) })
		}
	}

	return f
}

// Stop closes every connection and waits for the workers.
func (f *Flood) Stop() {
	f.cancel()
	f.wg.Wait()
}

// Counts returns what the flood saw of connections of kind k.
func (f *Flood) Counts(k Kind) Counts {
	c := &f.counts[k]

	return Counts{Open: c.open.Load(), Made: c.made.Load(), Failed: c.failed.Load(), Closed: c.closed.Load()}
}

// hold keeps one connection of kind open until ctx ends.
func (f *Flood) hold(ctx context.Context, kind Kind) {
	c := &f.counts[kind]

	for ctx.Err() == nil {
		conn, err := f.open(ctx, kind)
		if err != nil {
			c.failed.Add(1)
		} else {
			c.made.Add(1)
			c.open.Add(1)

			if waitClosed(ctx, conn) {
				c.closed.Add(1)
			}

			c.open.Add(-1)
		}

		select {
		case <-ctx.Done():
		case <-time.After(f.cfg.Redial):
		}
	}
}

// open makes one connection of kind and sends what that kind sends.
func (f *Flood) open(ctx context.Context, kind Kind) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.DialTimeout)
	defer cancel()

	d := &net.Dialer{}
	if f.cfg.Source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(f.cfg.Source)}
	}

	conn, err := d.DialContext(ctx, "tcp", f.cfg.Target)
	if err != nil {
		return nil, err
	}

	switch kind {
	case Idle:
		return idle(ctx, conn, f.cfg.TLS)
	case HalfHello:
		if _, err = conn.Write(halfHello); err != nil {
			conn.Close()

			return nil, err
		}
	}

	return conn, nil
}

// halfHello is a TLS record header announcing a 512-byte handshake record,
// and the start of a ClientHello: the server waits for the rest.
var halfHello = []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}

// idle completes the TLS handshake and sends the HTTP/2 preface and an
// empty SETTINGS frame: from there, the server waits for a call. It closes
// raw when it fails.
func idle(ctx context.Context, raw net.Conn, cfg *tls.Config) (net.Conn, error) {
	conn, err := handshake(ctx, raw, cfg)
	if err != nil {
		raw.Close()

		return nil, err
	}

	return conn, nil
}

func handshake(ctx context.Context, raw net.Conn, cfg *tls.Config) (net.Conn, error) {
	if cfg == nil {
		return nil, errors.New("flood: idle connections need a TLS config")
	}

	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}

	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, err
	}

	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		return nil, err
	}

	if err := http2.NewFramer(conn, nil).WriteSettings(); err != nil {
		return nil, err
	}

	return conn, nil
}

// waitClosed reads and discards until the server closes conn (true) or ctx
// ends (false); either way conn is closed when it returns.
func waitClosed(ctx context.Context, conn net.Conn) bool {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	_, _ = io.Copy(io.Discard, conn)
	conn.Close()

	return ctx.Err() == nil
}
