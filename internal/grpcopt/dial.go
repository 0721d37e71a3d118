package grpcopt

import (
	"context"
	"net"

	"google.golang.org/grpc"
)

// DialFrom makes a client's connections from the local IP address source,
// or lets the system choose when source is empty. trustd checks a node's
// certificate, and grants a joining node its addresses, by the address it
// calls from, so a node with a listen address calls from it.
func DialFrom(source string) grpc.DialOption {
	if source == "" {
		return grpc.EmptyDialOption{}
	}

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}

	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}
