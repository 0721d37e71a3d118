// Package grpcopt holds the gRPC options every Aegis server, or every
// client of one, shares.
package grpcopt

import (
	"runtime"

	"google.golang.org/grpc"
)

// StreamWorkers runs calls on a pool of one long-lived goroutine per CPU
// instead of a new goroutine per call. A new goroutine starts with a small
// stack that every call grows again (the interceptor chain, TLS, signing);
// a worker keeps its grown stack. In the benchmarks this takes 10–12 % off
// a certificate from trustd and a call through apid. When every worker is
// busy (long streams such as Events follows) gRPC starts a goroutine as
// usual, so no call waits for a worker. A server whose calls wait for
// something else while they hold their worker (apid for its backends,
// trustd for its record's sync) sizes its own pool instead.
//
// grpc.NumStreamWorkers is marked experimental; dropping this option is the
// whole of the way back.
func StreamWorkers() grpc.ServerOption {
	return grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))) //nolint:gosec // GOMAXPROCS is positive and small
}
