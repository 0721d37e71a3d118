package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/e2e/flood"
	"github.com/aegis-os/aegis/trustd"
)

// Outcomes of the listener cases.
const (
	connClosed      = "closed"
	connHeld        = "held open"
	overCapRefused  = "over the cap closed, another source served"
	overCapAccepted = "all held open"
)

// closeMargin is added to a server's bound before a case concludes that a
// connection was held open: room for a busy machine.
const closeMargin = 5 * time.Second

// listener describes one server's listener to the cases.
type listener struct {
	group     string
	addr      func(node string) string
	tls       func(e *Env) *tls.Config
	perSource int
	handshake time.Duration
	firstCall time.Duration
	// served makes one call to the server from a source of its own.
	served func(ctx context.Context, e *Env) error
}

// listenerCases check the bounds every listener keeps: a cap per source,
// a short handshake, and connections that make no call closed.
func listenerCases() []*Case {
	var out []*Case

	for _, l := range []listener{apidListener(), trustdListener()} {
		out = append(out, perSourceCase(l), silentCase(l), idleCase(l))
	}

	return out
}

func apidListener() listener {
	return listener{
		group: "apid", addr: apidAddr, perSource: apid.MaxConnectionsPerSource,
		handshake: apid.HandshakeTimeout, firstCall: apid.FirstCallTimeout,
		tls: func(e *Env) *tls.Config { return e.clientTLS(e.Target, e.ids.admin) },
		served: func(ctx context.Context, e *Env) error {
			c, err := e.admin(e.Target)
			if err != nil {
				return err
			}

			_, err = machine.NewMachineServiceClient(c).Version(ctx, &emptypb.Empty{})

			return err
		},
	}
}

func trustdListener() listener {
	return listener{
		group: "trustd", addr: trustdAddr, perSource: trustd.MaxConnectionsPerSource,
		handshake: trustd.HandshakeTimeout, firstCall: trustd.FirstCallTimeout,
		tls: func(e *Env) *tls.Config {
			return &tls.Config{RootCAs: e.roots, ServerName: e.Target, MinVersion: tls.VersionTLS13}
		},
		served: func(ctx context.Context, e *Env) error {
			source, err := e.sources.take()
			if err != nil {
				return err
			}

			c, err := e.trustdConn(e.Target, source)
			if err != nil {
				return err
			}
			defer c.Close() //nolint:errcheck // a probe connection

			_, err = grpc_health_v1.NewHealthClient(c).Check(ctx, &grpc_health_v1.HealthCheckRequest{})

			return err
		},
	}
}

// perSourceCase holds one connection more than the cap from one source:
// one is closed at once, and another source is still served.
func perSourceCase(l listener) *Case {
	return &Case{
		Group: l.group, Name: fmt.Sprintf("%d silent connections from one source (cap %d)", l.perSource+1, l.perSource),
		Expected: overCapRefused,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			f, err := e.flood(ctx, l, flood.Config{Silent: l.perSource + 1})
			if err != nil {
				r.Problemf("%v", err)

				return overCapAccepted
			}
			defer f.Stop()

			// Sooner than the handshake bound: closed by the cap, not by it.
			if !closedWithin(ctx, f, flood.Silent, l.handshake/2) {
				return overCapAccepted
			}

			if err := l.served(ctx, e); err != nil {
				r.Problemf("another source's call: %v", err)
			}

			return overCapRefused
		},
	}
}

// silentCase connects and never sends a ClientHello.
func silentCase(l listener) *Case {
	return &Case{
		Group: l.group, Name: "TCP connection that never sends a ClientHello", Expected: connClosed,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return e.holdOne(ctx, l, r, flood.Silent, l.handshake+closeMargin)
		},
	}
}

// idleCase completes the handshake and the HTTP/2 preface and makes no call.
func idleCase(l listener) *Case {
	return &Case{
		Group: l.group, Name: "TLS connection with the HTTP/2 preface and no call", Expected: connClosed,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return e.holdOne(ctx, l, r, flood.Idle, l.firstCall+closeMargin)
		},
	}
}

// holdOne opens one connection of kind and reports whether the server
// closed it within bound.
func (e *Env) holdOne(ctx context.Context, l listener, r *Report, kind flood.Kind, bound time.Duration) string {
	cfg := flood.Config{}
	if kind == flood.Idle {
		cfg.Idle = 1
	} else {
		cfg.Silent = 1
	}

	f, err := e.flood(ctx, l, cfg)
	if err != nil {
		r.Problemf("%v", err)

		return connHeld
	}
	defer f.Stop()

	if closedWithin(ctx, f, kind, bound) {
		return connClosed
	}

	return connHeld
}

// flood starts cfg against the target's listener from a source of its
// own, and waits until its connections are made.
func (e *Env) flood(ctx context.Context, l listener, cfg flood.Config) (*flood.Flood, error) {
	source, err := e.sources.take()
	if err != nil {
		return nil, err
	}

	cfg.Target, cfg.Source, cfg.TLS, cfg.Redial = l.addr(e.Target), source, l.tls(e), time.Hour

	f := flood.Start(ctx, cfg)
	want := int64(cfg.Idle + cfg.Silent)

	for made := int64(0); made < want; made = f.Counts(flood.Idle).Made + f.Counts(flood.Silent).Made {
		select {
		case <-ctx.Done():
			f.Stop()

			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}

	return f, nil
}

// closedWithin reports whether the server closed a connection of kind
// within d.
func closedWithin(ctx context.Context, f *flood.Flood, kind flood.Kind, d time.Duration) bool {
	deadline := time.After(d)

	for f.Counts(kind).Closed == 0 {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}

	return true
}
