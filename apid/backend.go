package apid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/wire"
)

// dialLocal makes the connection to machined. The socket is trusted by its
// file permissions, so the hop is plaintext; machined takes the caller's
// roles from talos-role metadata (authz.FromTrustedMetadata).
func dialLocal(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix:"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithMaxHeaderListSize(MaxMetadataSize),
		grpc.WithStaticStreamWindowSize(WindowSize),
		grpc.WithStaticConnWindowSize(ConnWindowSize),
		grpc.WithDisableServiceConfig(),
	)
	if err != nil {
		return nil, fmt.Errorf("apid: machined socket %s: %w", socket, err)
	}

	return conn, nil
}

// dialNode makes a connection to another node's apid, authenticated by the
// node's impersonator certificate. gRPC connects on first use.
func (s *Server) dialNode(t target) (*grpc.ClientConn, error) {
	bo := backoff.DefaultConfig
	bo.MaxDelay = NodeBackoffMaxDelay

	conn, err := grpc.NewClient("passthrough:///"+t.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(s.forwardTLS(t))),
		grpc.WithContextDialer(dialTCP),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.WithIdleTimeout(ConnIdleTimeout),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: NodeConnectTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithMaxHeaderListSize(MaxMetadataSize),
		grpc.WithStaticStreamWindowSize(WindowSize),
		grpc.WithStaticConnWindowSize(ConnWindowSize),
		grpc.WithDisableServiceConfig(),
	)
	if err != nil {
		return nil, fmt.Errorf("apid: node %s: %w", t.name, err)
	}

	return conn, nil
}

func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable:   true,
		Idle:     KeepaliveTime,
		Interval: KeepaliveTimeout,
		Count:    3,
	}}

	return d.DialContext(ctx, "tcp", addr)
}

// backend returns the connection a call of c to t goes through, and its
// release.
func (s *Server) backend(t target, c caller) (*grpc.ClientConn, func(), error) {
	if t.local {
		return s.local, func() {}, nil
	}

	if t.absent != nil {
		return nil, nil, t.absent
	}

	if s.forward == nil {
		return nil, nil, errNoForwarding
	}

	return s.nodes.get(t, c)
}

// callerOf identifies the caller for the pool: the key of its verified
// client certificate (a renewed certificate with the same key is the same
// caller, two certificates with one subject are not) and whether it is an
// admin.
func callerOf(ctx context.Context, roles role.Set) caller {
	c := caller{admin: roles.Has(role.Admin)}

	if chain, ok := authz.PeerChain(ctx); ok {
		c.id = peerOf(ctx, chain).id
	}

	return c
}

// nodeUnreachableError is a failure to reach another node: what the
// caller learns of it. The cause (refused connection, lookup, handshake)
// names this node's network and the other node's certificate, so it is
// logged, not sent.
// With deadline set, the caller's deadline passed before the node
// answered; with misnamed, the peer at the node's address did not prove
// to be that node (errNodeMisnamed), so nothing was sent to it.
type nodeUnreachableError struct {
	node     string
	deadline bool
	misnamed bool
}

func (e *nodeUnreachableError) Error() string {
	switch {
	case e.misnamed:
		return "apid: node " + e.node + " unreachable: the peer at its address does not prove to be " + e.node + ", nothing was sent"
	case e.deadline:
		return "apid: node " + e.node + " unreachable before the deadline"
	default:
		return "apid: node " + e.node + " unreachable"
	}
}

// code is the gRPC code of e.
func (e *nodeUnreachableError) code() codes.Code {
	if e.deadline {
		return codes.DeadlineExceeded
	}

	return codes.Unavailable
}

// unreachable logs why a call could not be opened on node and returns what
// the caller is told: the caller's own cancellation or deadline if that
// is what stopped it, else that the node is unreachable.
func (s *Server) unreachable(ctx context.Context, method, node string, err error) error {
	if !errors.Is(ctx.Err(), context.Canceled) {
		s.log.Info("node unreachable", slog.String(logkey.Method, method), slog.String(logkey.Node, node),
			slog.String(logkey.Error, err.Error()))
	}

	if errors.Is(ctx.Err(), context.Canceled) {
		return status.Error(codes.Canceled, context.Canceled.Error())
	}

	// gRPC passes a failed handshake on as text only: the refusal of
	// verifyNode is found by its message.
	return &nodeUnreachableError{
		node: node, deadline: errors.Is(ctx.Err(), context.DeadlineExceeded),
		misnamed: strings.Contains(err.Error(), errNodeMisnamed.Error()),
	}
}

// isHopHeader reports metadata keys that belong to one HTTP/2 hop, or that
// gRPC sets itself, and are never copied to the next hop.
func isHopHeader(k string) bool {
	switch k {
	case "content-type", "user-agent", "te", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	default:
		return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-")
	}
}

// outgoingMetadata is the metadata of the next hop: the caller's, without
// hop headers, without the routing keys (the next hop serves the call
// itself and never fans out again), and with talos-role replaced by the
// roles apid decided. Whatever talos-role, certificate or caller the caller
// sent is dropped; the caller the injector decided (the client, or the
// original client of a call another node forwarded) goes on instead, and
// for the methods that decide on the caller's certificate, the one the
// handshake verified. It is made from md, the call's own copy of its
// metadata (metadata.FromIncomingContext's), which nothing reads after.
func outgoingMetadata(ctx context.Context, md metadata.MD, method string, roles role.Set) metadata.MD {
	out := md
	if out == nil {
		out = metadata.MD{}
	}

	for k := range out {
		if isHopHeader(k) || k == wire.MetadataNode || k == wire.MetadataNodes || k == wire.MetadataRole || k == wire.MetadataClientCertificate ||
			k == authz.CallerSerialMetadataKey || k == authz.CallerSubjectMetadataKey {
			delete(out, k)
		}
	}

	authz.SetMetadata(out, roles)

	if c, ok := authz.CallerFromContext(ctx); ok {
		authz.SetCallerMetadata(out, authz.Caller{Serial: c.Serial, Subject: c.Subject})
	}

	if authz.NeedsPeerCertificate(method) {
		leaf, _ := authz.PeerCertificate(ctx)
		authz.SetCertificateMetadata(out, leaf)
	}

	return out
}
