// Package pprofserve serves Go's profiles (/debug/pprof/) for
// performance work, on a loopback address only, to the daemons that offer
// --pprof-listen.
package pprofserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/aegis-os/aegis/internal/logkey"
)

// readTimeout bounds a profile request's headers; profiles
// themselves stream for as long as they were asked (?seconds=N).
const readTimeout = 5 * time.Second

// Listen opens Go's profiling endpoints (/debug/pprof/…) on addr,
// which must be a loopback address: profiles show the process's code
// paths and heap, so they are never offered to the network. The
// endpoint is off unless --pprof-listen names it; it serves plain HTTP.
func Listen(addr string) (net.Listener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen %q: want IP:PORT: %w", addr, err)
	}

	if !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("--pprof-listen %q: only a loopback address may serve profiles", addr)
	}

	lis, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen: %w", err)
	}

	return lis, nil
}

// Serve serves the profiles on lis until ctx ends.
func Serve(ctx context.Context, lis net.Listener, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readTimeout}

	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()

	log.Info("profiles served", slog.String(logkey.Address, "http://"+lis.Addr().String()+"/debug/pprof/"))

	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pprof: %w", err)
	}

	return nil
}
