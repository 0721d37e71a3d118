// Package metrics serves one daemon's Prometheus metrics: a registry of
// its own (never the global default one), go-grpc-middleware's gRPC server
// metrics with method names bounded to the ones served, collectors that
// read the state components already keep (certificates, connection
// limits), and a plain HTTP server with /metrics and nothing else.
//
// A component takes a prometheus.Registerer in its Config; nil means no
// metrics, and every constructor here returns something that does nothing
// for a nil Registerer, so callers need no second code path.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aegis-os/aegis/internal/connlimit"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Path is the one path the endpoint serves.
const Path = "/metrics"

// NewRegistry returns a daemon's registry with the Go runtime's and the
// process's collectors, and BuildInfo, in it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newBuildInfo())

	return reg
}

// Open makes a daemon's registry and opens its endpoint on addr; an empty
// addr (metrics off) returns a nil Registerer and a nil Server, both of
// which the rest of this package and every component take as "no metrics".
func Open(addr string, log *slog.Logger) (prometheus.Registerer, *Server, error) {
	if addr == "" {
		return nil, nil, nil
	}

	reg := NewRegistry()

	srv, err := Listen(addr, reg, log)
	if err != nil {
		return nil, nil, err
	}

	return reg, srv, nil
}

// Server serves a registry over plain HTTP: GET /metrics, 404 for anything
// else (no pprof, no index), its connections bounded (limits.go).
type Server struct {
	lis  net.Listener
	http *http.Server
	log  *slog.Logger
}

// Listen opens addr for reg's endpoint; Serve serves it.
func Listen(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	log = defaults.Logger(log)

	conns, err := connlimit.New(connlimit.Config{
		PerSource: MaxConnectionsPerSource, Total: MaxConnections, FirstCall: FirstRequestTimeout, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET "+Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		MaxRequestsInFlight: MaxScrapesInFlight,
		Timeout:             ScrapeTimeout,
		ErrorLog:            errorLog{log},
	}))

	return &Server{lis: conns.Wrap(lis), log: log, http: &http.Server{
		Handler: mux,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateActive {
				conns.MarkCalled(c)
			}
		},
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadHeaderTimeout,
		WriteTimeout:      ScrapeTimeout + ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}}, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Serve serves until ctx ends, then closes the listener and every
// connection: a scrape is cheap to repeat.
func (s *Server) Serve(ctx context.Context) error {
	if s == nil {
		<-ctx.Done()

		return nil
	}

	served := make(chan error, 1)

	go func() { served <- s.http.Serve(s.lis) }()

	s.log.Info("metrics serving", slog.String(logkey.Listen, s.lis.Addr().String()))

	select {
	case err := <-served:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
		_ = s.http.Close()

		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics: %w", err)
		}

		return nil
	}
}

// Close closes a Server that never served; nil is a no-op.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}

	return s.lis.Close()
}

// errorLog writes promhttp's errors to the daemon's log.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) {
	e.log.Warn("metrics: scrape failed", slog.String(logkey.Error, fmt.Sprint(v...)))
}
