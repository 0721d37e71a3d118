package trustdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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
	// began is told when a handshake begins: TCP connected.
	began func()
}

func (c *perHandshake) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c.began()

	conn, info, err := credentials.NewTLS(c.config(c.host)).ClientHandshake(ctx, authority, raw)
	if errors.As(err, new(x509.UnknownAuthorityError)) {
		err = fmt.Errorf("%w: %w", ErrUnknownAuthority, err)
	}

	return conn, info, err
}

// ErrUnknownAuthority names the likely cause of a trustd certificate that
// chains to no CA the node accepts: the node was left behind by a
// rotation of the cluster's OS CA (it was stopped meanwhile, or its
// state restored from an older backup), and what brings it back. gRPC
// passes the handshake's error on as text, so the words are what reach
// the node's log.
var ErrUnknownAuthority = errors.New("trustd serves a certificate of a CA this node does not accept: " +
	"if the cluster's OS CA was rotated while the node was away, give it a config made from the current secrets bundle " +
	"and restart it (aegisctl cluster readmit NODE on a local cluster)")

func (c *perHandshake) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3"}
}

func (c *perHandshake) Clone() credentials.TransportCredentials {
	return &perHandshake{host: c.host, config: c.config, began: c.began}
}

func (c *perHandshake) OverrideServerName(string) error { return nil }
