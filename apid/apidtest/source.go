package apidtest

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
)

// TalosClientFrom is TalosClient with its connections made from the
// loopback address source, so that a test can act as distinct callers.
func TalosClientFrom(tb testing.TB, endpoint, source string, tlsCfg *tls.Config) *client.Client {
	tb.Helper()

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})

	c, err := client.New(context.Background(), client.WithEndpoints(endpoint), client.WithTLSConfig(tlsCfg), client.WithGRPCDialOptions(dial))
	if err != nil {
		tb.Fatalf("client: %v", err)
	}

	tb.Cleanup(func() { c.Close() }) //nolint:errcheck // closing a client in cleanup

	return c
}
