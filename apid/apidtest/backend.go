// Package apidtest holds what apid's tests stand on: a stand-in for
// machined that serves a few MachineService methods on a Unix socket, a
// test PKI, and in-process apid nodes.
package apidtest

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/healthprobe"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
)

// Call is one call the backend received.
type Call struct {
	// Method is the full method name.
	Method string
	// Roles are the talos-role values the call carried, as received.
	Roles []string
	// Metadata is all the call's metadata.
	Metadata metadata.MD
}

// BackendConfig configures a Backend.
type BackendConfig struct {
	// Hostname is the node's name, in every reply's metadata and in the
	// Hostname reply. Empty means "node".
	Hostname string
	// Socket is the socket path. Empty means a new path in a temporary
	// directory. It must be short: Unix socket paths are limited to 108 bytes.
	Socket string
	// Register adds more services beside the MachineService, behind the
	// same interceptors. Nil adds none.
	Register func(*grpc.Server)
}

// Backend stands in for machined until it exists: it serves Version,
// Hostname, Memory, ServiceList, ServiceRestart, Logs (tail and follow),
// Events (tail and follow) and EtcdRecover (a client stream) over a Unix
// socket, answers Unimplemented
// for every other method, and records the roles each call carried in
// talos-role. Like machined, it trusts the socket and authorizes again
// with those roles (authz.FromTrustedMetadata).
type Backend struct {
	hostname string
	socket   string
	srv      *grpc.Server
	feed     *feed

	mu        sync.Mutex
	calls     []Call
	recovered [][][]byte // the chunks of each EtcdRecover call
}

// StartBackend starts a backend; it stops when the test ends.
func StartBackend(tb testing.TB, cfg BackendConfig) *Backend {
	tb.Helper()

	if cfg.Hostname == "" {
		cfg.Hostname = "node"
	}

	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(testutil.ShortTempDir(tb), "machined.sock")
	}

	b := &Backend{hostname: cfg.Hostname, socket: cfg.Socket, feed: newFeed(cfg.Hostname)}

	lis, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		tb.Fatalf("backend socket: %v", err)
	}

	inject := authz.NewInjector(authz.InjectorConfig{Mode: authz.FromTrustedMetadata})
	authorize := authz.NewAuthorizer(authz.AuthorizerConfig{})

	// Like machined, the health service answers without roles.
	b.srv = grpc.NewServer(
		grpc.ChainUnaryInterceptor(healthprobe.Unary(b.recordUnary, inject.UnaryServerInterceptor(), authorize.UnaryServerInterceptor())...),
		grpc.ChainStreamInterceptor(healthprobe.Stream(b.recordStream, inject.StreamServerInterceptor(), authorize.StreamServerInterceptor())...),
	)
	machine.RegisterMachineServiceServer(b.srv, machineServer{Backend: b})

	if cfg.Register != nil {
		cfg.Register(b.srv)
	}

	go b.srv.Serve(lis) //nolint:errcheck // Serve ends when Stop is called

	tb.Cleanup(b.Stop)

	return b
}

// Socket returns the backend's socket path.
func (b *Backend) Socket() string { return b.socket }

// Name returns the backend's node name.
func (b *Backend) Name() string { return b.hostname }

// Stop stops serving; open streams end.
func (b *Backend) Stop() { b.srv.Stop() }

// Calls returns every call received so far, in order.
func (b *Backend) Calls() []Call {
	b.mu.Lock()
	defer b.mu.Unlock()

	return slices.Clone(b.calls)
}

// CallsTo returns the calls received for method.
func (b *Backend) CallsTo(method string) []Call {
	var out []Call

	for _, c := range b.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}

	return out
}

// Recovered returns the chunks each EtcdRecover call sent, in order.
func (b *Backend) Recovered() [][][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()

	return slices.Clone(b.recovered)
}

// AppendLog adds a line to a service's log, seen by Logs followers.
func (b *Backend) AppendLog(service, line string) { b.feed.appendLog(service, line) }

// WaitLogFollowers blocks until exactly n Logs calls follow the backend:
// a test adds lines only once they are watched, and sees a follow end when
// its caller leaves.
func (b *Backend) WaitLogFollowers(ctx context.Context, n int) error {
	return b.feed.waitFollowers(ctx, followLogs, n)
}

// WaitEventFollowers blocks until exactly n Events calls follow the backend.
func (b *Backend) WaitEventFollowers(ctx context.Context, n int) error {
	return b.feed.waitFollowers(ctx, followEvents, n)
}

// PublishServiceEvent adds a service state event, seen by Events followers.
func (b *Backend) PublishServiceEvent(service string, action machine.ServiceStateEvent_Action, msg string) {
	b.feed.publish(service, action, msg)
}

func (b *Backend) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)

	b.mu.Lock()
	defer b.mu.Unlock()

	b.calls = append(b.calls, Call{Method: method, Roles: md.Get(wire.MetadataRole), Metadata: md.Copy()})
}

func (b *Backend) recordUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	b.record(ctx, info.FullMethod)

	return handler(ctx, req)
}

func (b *Backend) recordStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	b.record(ss.Context(), info.FullMethod)

	return handler(srv, ss)
}
