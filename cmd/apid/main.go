// Command apid is the node's public API: mTLS with role-based authorization
// in front of the local machined and, through node-to-node forwarding, of
// the other nodes of the cluster.
//
//	apid --cert FILE --key FILE --ca BUNDLE --machined-socket PATH
//	     [--impersonator-cert FILE --impersonator-key FILE]
//	     [--listen ADDR [--listen-fd N]] [--self NAME]... [--node-name NAME]... [--watch-interval D]
//	     [--shutdown-timeout D] [--log-level debug|info|warn|error] [--log-format json|text] [--metrics-listen ADDR]
//	apid --version
//
// --listen-fd serves the socket inherited as descriptor N, which must
// listen on --listen: machined (process runtime) holds apid's socket
// across apid's restarts and passes it so.
// Certificate and CA files are watched and reloaded when they are replaced,
// without dropping connections. --metrics-listen serves Prometheus metrics
// at http://ADDR/metrics (machined passes it when machine.metrics is on).
// It logs JSON to stderr (key=value lines with --log-format text) and stops gracefully on SIGTERM or SIGINT.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)

	stop()
	os.Exit(code)
}
