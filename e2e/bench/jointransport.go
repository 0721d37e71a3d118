package bench

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/token"
)

// JoinSources holds the source addresses of the join storm's clients, one
// each, as nodes joining at once come from addresses of their own: from a
// single address, trustd's per-source cap would refuse most of the storm.
var JoinSources = netip.MustParsePrefix("127.7.6.0/24")

// joinSource is the address of the i-th storm client.
func joinSource(i int) string {
	a := JoinSources.Addr().Next()
	for range i % (1<<(32-JoinSources.Bits()) - 2) {
		a = a.Next()
	}

	return a.String()
}

// sourcedTransport is join.GRPCTransport from a given source address.
type sourcedTransport struct {
	cas    *ca.AcceptedSet
	source string
}

// Certificate implements join.Transport, with a connection per call as
// join.GRPCTransport.
func (t sourcedTransport) Certificate(ctx context.Context, endpoint string, tok token.Token, csrPEM []byte) ([]byte, []byte, error) {
	creds := credentials.NewTLS(&tls.Config{RootCAs: t.cas.Pool(), MinVersion: tls.VersionTLS13})
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(t.source)}}

	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close() //nolint:errcheck // a connection per call

	ctx = metadata.AppendToOutgoingContext(ctx, trustd.TokenMetadataKey, tok.Reveal())

	resp, err := securityapi.NewSecurityServiceClient(conn).Certificate(ctx, &securityapi.CertificateRequest{Csr: csrPEM})
	if err != nil {
		return nil, nil, err
	}

	return resp.GetCa(), resp.GetCrt(), nil
}
