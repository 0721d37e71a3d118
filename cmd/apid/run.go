package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/logbuf"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/pprofserve"
	"github.com/aegis-os/aegis/internal/unixsock"
	"github.com/aegis-os/aegis/renewal"
)

// run is apid's whole life; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)

	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "apid:", err)

		return 2
	case o.Version:
		daemonflag.PrintVersion(stdout, "apid")

		return 0
	}

	// Request log lines wait up to apid.RequestLogInterval and go out
	// together; every other line is written at once, after them.
	out, err := logbuf.New(logbuf.Config{Out: stderr, Interval: apid.RequestLogInterval, MaxBuffered: apid.RequestLogBuffer})
	if err != nil {
		fmt.Fprintln(stderr, "apid:", err)

		return 1
	}
	defer out.Close() //nolint:errcheck // the last lines are written; a failing stderr has no one to tell

	log := slog.New(o.Handler(out))

	if err := serve(ctx, o, log, slog.New(o.Handler(out.Deferred()))); err != nil {
		log.Error("apid stopped", slog.String(logkey.Error, err.Error()))

		return 1
	}

	return 0
}

// files are apid's certificates and CAs, reloaded when replaced.
type files struct {
	server   *certs.KeyPair
	forward  *certs.KeyPair // nil without --impersonator-cert
	accepted atomic.Pointer[ca.AcceptedSet]
	// revoked is the revocation list machined follows; the file mode has
	// none.
	revoked apid.Revocations
	members memberNames // filled from machined's resources only
}

func loadFiles(o *options) (*files, error) {
	f := &files{}

	var err error
	if f.server, err = certs.LoadKeyPairFiles(o.certPath, o.keyPath); err != nil {
		return nil, err
	}

	if o.impCertPath != "" {
		if f.forward, err = certs.LoadKeyPairFiles(o.impCertPath, o.impKeyPath); err != nil {
			return nil, err
		}
	}

	return f, f.reloadCAs(o.caPath)
}

func (f *files) reloadCAs(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("apid: %w", err)
	}

	set, err := ca.ParseAcceptedSet(data, time.Now())
	if err != nil {
		return fmt.Errorf("apid: %s: %w", path, err)
	}

	f.accepted.Store(set)

	return nil
}

// watch reloads every file when it is replaced, until ctx ends.
func (f *files) watch(ctx context.Context, o *options, log *slog.Logger) {
	clk := clock.Real()

	go renewal.WatchFiles(ctx, clk, o.watchInterval, []string{o.certPath, o.keyPath}, func() error {
		return f.server.SetFromFiles(o.certPath, o.keyPath)
	}, log)

	go renewal.WatchFiles(ctx, clk, o.watchInterval, []string{o.caPath}, func() error {
		return f.reloadCAs(o.caPath)
	}, log)

	if f.forward != nil {
		go renewal.WatchFiles(ctx, clk, o.watchInterval, []string{o.impCertPath, o.impKeyPath}, func() error {
			return f.forward.SetFromFiles(o.impCertPath, o.impKeyPath)
		}, log)
	}
}

// serve runs apid until ctx ends; reqLog takes the request log lines.
func serve(ctx context.Context, o *options, log, reqLog *slog.Logger) error {
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()

	f, self, role, err := load(watchCtx, o, log)
	if err != nil {
		return err
	}

	lis, err := o.listener()
	if err != nil {
		return fmt.Errorf("apid: %w", err)
	}

	reg, endpoint, err := metrics.Open(o.MetricsListen, log)
	if err != nil {
		lis.Close()

		return fmt.Errorf("apid: %w", err)
	}

	cfg := apid.Config{
		Certificate:    f.server,
		AcceptedCAs:    f.accepted.Load,
		Revocations:    &f.revoked,
		MachinedSocket: o.socket,
		Self:           append(o.selfNames(lis.Addr(), net.InterfaceAddrs), self...),
		Names:          o.names,
		Metrics:        reg,
		Members:        &f.members,
		Role:           role,
		Logger:         log,
		RequestLogger:  reqLog,
	}
	if f.forward != nil {
		// Only a loaded pair: a nil *KeyPair in the interface would look
		// like a forwarding certificate.
		cfg.ForwardCertificate = f.forward
	}

	srv, err := apid.New(cfg)
	if err != nil {
		lis.Close()
		endpoint.Close() //nolint:errcheck // failing already

		return err
	}

	if o.nodeSocket == "" {
		f.watch(watchCtx, o, log)
	}

	if err := startPprof(watchCtx, o.pprof, log); err != nil {
		lis.Close()
		endpoint.Close() //nolint:errcheck // failing already

		return err
	}

	go func() {
		if err := endpoint.Serve(watchCtx); err != nil {
			log.Error("metrics endpoint stopped", slog.String(logkey.Error, err.Error()))
		}
	}()

	stopHealth, err := serveHealth(o.healthSocket, srv, log)
	if err != nil {
		lis.Close()
		endpoint.Close() //nolint:errcheck // failing already

		return err
	}
	defer stopHealth()

	return serveUntil(ctx, srv, lis, o, log)
}

// serveHealth serves srv's health service on the Unix socket at path
// (--health-socket) until the returned stop; "" serves nothing.
func serveHealth(path string, srv *apid.Server, log *slog.Logger) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}

	lis, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("apid: health socket: %w", err)
	}

	hs := grpc.NewServer()
	srv.RegisterHealth(hs)

	go func() {
		if err := hs.Serve(lis); err != nil {
			log.Error("health socket stopped", slog.String(logkey.Error, err.Error()))
		}
	}()

	return hs.Stop, nil
}

// load reads the certificates and CAs from the files, or follows them from
// machined's socket; the second result adds names meaning this node, the
// third is its role (--role in the file mode).
func load(ctx context.Context, o *options, log *slog.Logger) (*files, []string, string, error) {
	if o.nodeSocket == "" {
		f, err := loadFiles(o)

		return f, nil, o.role, err
	}

	n, err := loadNode(ctx, o, log)
	if err != nil {
		return nil, nil, "", err
	}

	return &n.files, n.self, n.role, nil
}

func serveUntil(ctx context.Context, srv *apid.Server, lis net.Listener, o *options, log *slog.Logger) error {
	errc := make(chan error, 1)

	go func() { errc <- srv.Serve(lis) }()

	log.Info("apid serving", slog.String(logkey.Listen, lis.Addr().String()), slog.Bool(logkey.Forwarding, srv.Forwards()))

	select {
	case err := <-errc:
		srv.Stop()

		return err
	case <-ctx.Done():
	}

	log.Info("apid stopping", slog.Duration(logkey.Grace, o.shutdownTimeout))

	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()

	srv.Shutdown(sctx)

	return <-errc
}

// startPprof serves Go's profiles on addr (--pprof-listen) until ctx
// ends; without the flag, nothing is opened.
func startPprof(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}

	lis, err := pprofserve.Listen(addr)
	if err != nil {
		return fmt.Errorf("apid: %w", err)
	}

	go func() {
		if err := pprofserve.Serve(ctx, lis, log); err != nil {
			log.Error("profiles endpoint stopped", slog.String(logkey.Error, err.Error()))
		}
	}()

	return nil
}
