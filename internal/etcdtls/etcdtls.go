// Package etcdtls is the TLS of the clients of a control plane's etcd
// (machined's and trustd's): the trusted etcd CAs and the client
// certificate are read from their files at each handshake, so that a
// renewal, and the trust of an etcd CA rotation, apply to a running client
// without closing it.
package etcdtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Files are the PEM files of an etcd client: CA holds every trusted etcd
// CA (a bundle during a rotation), Cert and Key the client's pair.
type Files struct {
	CA, Cert, Key string
}

// Config reads the files now and returns a TLS config that trusts their
// CAs and presents their client certificate, read again at each handshake.
func (f Files) Config() (*tls.Config, error) {
	data, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("etcdtls: etcd CA: %w", err)
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("etcdtls: no CA certificate in " + f.CA)
	}

	return &tls.Config{
		RootCAs:    pool,
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(f.Cert, f.Key)

			return &c, err
		},
	}, nil
}

// DialOption makes an etcd client (clientv3.Config.DialOptions, which
// etcd applies after its own and so override them) build the TLS config of
// each connection from the files when it is made: the pool of a config
// in use is never changed, a new connection gets a new one.
func (f Files) DialOption() grpc.DialOption { return grpc.WithTransportCredentials(f.Credentials()) }

// Credentials are gRPC's TLS credentials with a config read from the files
// at each handshake.
func (f Files) Credentials() credentials.TransportCredentials { return perHandshake{files: f} }

// perHandshake is gRPC's TLS credentials with a config read per connection.
type perHandshake struct {
	credentials.TransportCredentials

	files Files
}

func (c perHandshake) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := c.files.Config()
	if err != nil {
		return nil, nil, err
	}

	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (c perHandshake) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (c perHandshake) Clone() credentials.TransportCredentials { return perHandshake{files: c.files} }

//nolint:staticcheck // part of the interface; the server name comes from the authority
func (c perHandshake) OverrideServerName(string) error { return nil }
