package trustdclient

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
)

// perHandshake builds a fresh TLS config for each connection when it is
// made, so that a renewed node certificate and a changed set of accepted
// CAs apply to the next connection without touching a config in use.
type perHandshake struct {
	credentials.TransportCredentials

	host   string
	config func(host string) *tls.Config
}

func (c *perHandshake) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.config(c.host)).ClientHandshake(ctx, authority, raw)
}

func (c *perHandshake) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3"}
}

func (c *perHandshake) Clone() credentials.TransportCredentials {
	return &perHandshake{host: c.host, config: c.config}
}

func (c *perHandshake) OverrideServerName(string) error { return nil }
