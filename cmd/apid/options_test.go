package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestParseOptions(t *testing.T) {
	base := []string{"--cert", "c", "--key", "k", "--ca", "ca", "--machined-socket", "s"}

	tests := []struct {
		name string
		args []string
		bad  string
	}{
		{name: "minimal", args: base},
		{name: "forwarding", args: append(slices.Clone(base), "--impersonator-cert", "i", "--impersonator-key", "ik")},
		{name: "missing socket", args: base[:6], bad: "required"},
		{name: "half impersonator", args: append(slices.Clone(base), "--impersonator-cert", "i"), bad: "go together"},
		{name: "bad listen", args: append(slices.Clone(base), "--listen", "nowhere"), bad: "--listen"},
		{name: "argument", args: append(slices.Clone(base), "extra"), bad: "no arguments"},
		{name: "zero interval", args: append(slices.Clone(base), "--watch-interval", "0s"), bad: "--watch-interval"},
		{name: "unknown flag", args: append(slices.Clone(base), "--nope"), bad: "nope"},
		{name: "log level", args: append(slices.Clone(base), "--log-level", "debug")},
		{name: "bad log level", args: append(slices.Clone(base), "--log-level", "loud"), bad: `unknown log level "loud": use debug, info, warn or error`},
		{name: "log format text", args: append(slices.Clone(base), "--log-format", "text")},
		{name: "bad log format", args: append(slices.Clone(base), "--log-format", "yaml"), bad: `unknown log format "yaml": use json or text`},
		{name: "inherited socket", args: append(slices.Clone(base), "--listen", "127.0.1.2:50000", "--listen-fd", "3")},
		{name: "negative descriptor", args: append(slices.Clone(base), "--listen-fd", "-3"), bad: "--listen-fd -3: want an inherited descriptor"},
		{name: "version alone", args: []string{"--version"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer

			_, err := parseOptions(tt.args, &stderr)
			if tt.bad == "" {
				if err != nil {
					t.Fatal(err)
				}

				return
			}

			if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.bad) {
				t.Fatalf("err %v, stderr %q; want %q", err, stderr.String(), tt.bad)
			}
		})
	}
}

// TestListenerChecksTheInheritedSocket: --listen-fd must be a socket
// listening on --listen; a mismatch stops apid with both named.
func TestListenerChecksTheInheritedSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}

	// A bare descriptor, as apid inherits it; the refusal closes it.
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()

	if err != nil {
		t.Fatal(err)
	}

	o := &options{listen: "127.0.0.1:1", listenFD: fd}
	if _, err := o.listener(); err == nil || !strings.Contains(err.Error(), "listens on "+l.Addr().String()+", not on 127.0.0.1:1") {
		t.Fatalf("err = %v, want the mismatch named", err)
	}
}

func TestRunExitStatus(t *testing.T) {
	var stderr bytes.Buffer

	if code := run(context.Background(), []string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help: %d", code)
	}

	if code := run(context.Background(), []string{"--cert"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("bad usage: %d", code)
	}

	missing := []string{"--cert", "/nonexistent/c", "--key", "/nonexistent/k", "--ca", "/nonexistent/ca", "--machined-socket", "/nonexistent/s"}
	if code := run(context.Background(), missing, io.Discard, &stderr); code != 1 {
		t.Fatalf("missing files: %d", code)
	}
}

func TestVersion(t *testing.T) {
	var stdout bytes.Buffer

	if code := run(context.Background(), []string{"--version"}, &stdout, io.Discard); code != 0 || !strings.HasPrefix(stdout.String(), "apid v") {
		t.Fatalf("--version: %d %q", code, stdout.String())
	}
}

func TestSelfNames(t *testing.T) {
	o := &options{self: []string{"cp-1"}}
	host := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("10.5.0.2"), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("fd00::2"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}

	got := o.selfNames(&net.TCPAddr{IP: net.ParseIP("127.0.2.1"), Port: 50000}, host)
	if !slices.Equal(got, []string{"cp-1", "127.0.2.1:50000", "127.0.2.1"}) {
		t.Fatalf("specific address: %v", got)
	}

	got = o.selfNames(&net.TCPAddr{IP: net.IPv4zero, Port: 50000}, host)
	if !slices.Equal(got, []string{"cp-1", "10.5.0.2", "10.5.0.2:50000", "fd00::2", "[fd00::2]:50000"}) {
		t.Fatalf("every address: %v", got)
	}
}
