// Command aegis-hollow is `make scale`: a cluster of three control planes
// and N hollow workers against it (the worker's client code, one loopback
// address each, no apid, containerd or services), measured against issue
// 33's goals. It prints the table and writes it as JSON; the cluster is
// destroyed whatever happens. See docs/scale.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/e2e/scale"
	"github.com/aegis-os/aegis/internal/pprofserve"
)

// harnessGCPercent is the harness's GOGC unless the environment sets one.
// Its thousands of workers allocate for every handshake; with Go's default
// of 100 the collector took a quarter of its CPU at 5,000 workers, on the
// cores the control planes measured share. A worker's memory is small (a
// few hundred KiB), so four times the live heap costs gigabytes at most.
const harnessGCPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(harnessGCPercent)
	}

	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "aegis-hollow:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg                  scale.Config
		cidr, sources, jsonf string
	)

	flag.IntVar(&cfg.Workers, "n", 10000, "hollow workers")
	flag.StringVar(&cfg.BinDir, "bin-dir", "bin", "folder of machined, trustd, apid, etcd and aegisctl")
	flag.StringVar(&cfg.Dir, "dir", "", "folder for the cluster's state (default: a temporary one, removed)")
	flag.StringVar(&cidr, "cidr", "127.11.0.0/24", "loopback range of the control planes")
	flag.StringVar(&sources, "sources", "127.64.0.0/16", "loopback range the hollow workers call from, one address each")
	flag.DurationVar(&cfg.NodeCertTTL, "node-cert-ttl", 0, "lifetime of the node certificates: renewal at half of it (default 4m, or 90ms a worker when longer)")
	flag.DurationVar(&cfg.Window, "window", time.Minute, "steady-state window")
	flag.StringVar(&jsonf, "json", "_out/scale/results.json", "where the results go as JSON")
	verbose := flag.Bool("v", false, "print the hollow workers' logs")
	pprofAddr := flag.String("pprof-listen", "", "serve the harness's own Go profiles on this loopback IP:PORT (off by default)")
	flag.Parse()

	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	var err error
	if cfg.CIDR, err = netip.ParsePrefix(cidr); err != nil {
		return fmt.Errorf("--cidr: %w", err)
	}

	if cfg.Sources, err = netip.ParsePrefix(sources); err != nil {
		return fmt.Errorf("--sources: %w", err)
	}

	if cfg.BinDir, err = filepath.Abs(cfg.BinDir); err != nil {
		return err
	}

	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "aegis-scale-"); err != nil {
			return err
		}
		defer os.RemoveAll(cfg.Dir) //nolint:errcheck // a temporary folder
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *pprofAddr != "" {
		lis, err := pprofserve.Listen(*pprofAddr)
		if err != nil {
			return err
		}

		go func() { _ = pprofserve.Serve(ctx, lis, slog.Default()) }()
	}

	cfg.Progress = os.Stderr
	res, runErr := scale.Run(ctx, cfg)

	return errors.Join(runErr, res.WriteTable(os.Stdout), writeJSON(jsonf, res))
}

func writeJSON(path string, res scale.Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}

	return errors.Join(res.WriteJSON(f), f.Close())
}
