package apid

import (
	"context"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
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
		grpc.WithTransportCredentials(credentials.NewTLS(s.forwardTLS(t.host))),
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

// backend returns the connection a call to t goes through, and its release.
func (s *Server) backend(t target) (*grpc.ClientConn, func(), error) {
	if s.isSelf(t) {
		return s.local, func() {}, nil
	}

	if s.forward == nil {
		return nil, nil, errNoForwarding
	}

	return s.nodes.get(t)
}

func (s *Server) isSelf(t target) bool { return s.self[t.name] || s.self[t.addr] }

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
// roles apid decided. Whatever talos-role the caller sent is dropped.
func outgoingMetadata(ctx context.Context, roles role.Set) metadata.MD {
	in, _ := metadata.FromIncomingContext(ctx)
	out := make(metadata.MD, len(in)+1)

	for k, v := range in {
		if isHopHeader(k) || k == MetadataNode || k == MetadataNodes || k == authz.MetadataKey {
			continue
		}

		out[k] = v
	}

	authz.SetMetadata(out, roles)

	return out
}
