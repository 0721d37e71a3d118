// Package wire holds what two Aegis processes, or Aegis and a Talos
// client, must agree on: the ports and the gRPC metadata keys. Every
// package may import it; it imports only the standard library. Role names
// are in authz/role, the bootstrap token format in token, and the sockets
// of a node's state directory in machined/layout.
package wire

import (
	"net"
	"strconv"
)

// Standard ports of the Aegis API (apid) and of trustd, as Talos's.
const (
	APIDPort   = 50000
	TrustdPort = 50001
)

// The routing metadata keys of the Talos API. Clients of the 1.11–1.13
// series send `nodes` and let apid fan out; newer ones send `node` to each
// node and fan out themselves.
const (
	MetadataNode  = "node"
	MetadataNodes = "nodes"
)

// MetadataRole is the gRPC metadata key that carries a caller's roles on a
// hop trusted to pass them: apid to machined, and one node's apid to
// another's. The name is Talos's, so the wire stays compatible.
const MetadataRole = "talos-role"

// MetadataClientCertificate carries, on apid's hop to machined, the client
// certificate apid verified, for the methods that decide on the
// certificate itself rather than on roles (see
// authz.NeedsPeerCertificate). Like talos-role it is trusted only on
// machined's socket; apid drops whatever a caller sent under this key and
// sets its own.
const MetadataClientCertificate = "aegis-client-certificate"

// MetadataToken is the metadata key carrying the bootstrap token in a call
// to trustd, as in Talos.
const MetadataToken = "token"

// WithDefaultPort returns host:port, adding port when hostport has none.
func WithDefaultPort(hostport string, port int) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}

	return net.JoinHostPort(hostport, strconv.Itoa(port))
}
