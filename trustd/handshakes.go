package trustd

import (
	"errors"
	"io"
	"net"
	"os"

	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/internal/metrics"
)

// Handshake refusals as the metrics label them. trustd verifies no client
// certificate during the handshake (a joining node has none; the token
// authenticates it), so every refusal is of the TLS exchange itself: a
// client of another protocol or version, a scanner.
const (
	listenerName    = "trustd"
	reasonHandshake = "handshake"
)

// countedCreds counts the handshakes trustd refuses. A connection closed
// before its ClientHello (a port probe) or cut by a deadline or the
// listener is no refusal: the connection limits deal with those.
type countedCreds struct {
	credentials.TransportCredentials
	counted *metrics.HandshakeRefusalCounter
}

func (c countedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
		c.counted.Count(reasonHandshake)
	}

	return out, info, err
}

func (c countedCreds) Clone() credentials.TransportCredentials {
	return countedCreds{TransportCredentials: c.TransportCredentials.Clone(), counted: c.counted}
}
