package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

func TestPprofOffByDefaultAndLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	log := slog.New(slog.DiscardHandler)
	if err := startPprof(ctx, "", log); err != nil {
		t.Fatalf("no --pprof-listen: %v", err)
	}

	if err := startPprof(ctx, "0.0.0.0:0", log); err == nil {
		t.Fatal("--pprof-listen 0.0.0.0:0 accepted")
	}

	if err := startPprof(ctx, "127.0.0.1:0", log); err != nil {
		t.Fatalf("--pprof-listen 127.0.0.1:0: %v", err)
	}

	o, err := parseOptions([]string{"--machined-socket", "/s", "--node-socket", "/n", "--pprof-listen", "127.0.0.1:6061"}, io.Discard)
	if err != nil || o.pprof != "127.0.0.1:6061" {
		t.Fatalf("parse: %v, pprof %q", err, o.pprof)
	}
}
