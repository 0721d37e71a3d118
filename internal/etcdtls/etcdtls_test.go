package etcdtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/etcdtls"
)

// TestTrustFollowsTheFile: one set of credentials, whose CA file gains the
// CA of the server's certificate, handshakes with it from then on.
func TestTrustFollowsTheFile(t *testing.T) {
	now := time.Now()
	oldCA, newCA := catest.NewCA(t, ca.ECDSAP256, now), catest.NewCA(t, ca.ECDSAP256, now)
	dir := t.TempDir()
	files := etcdtls.Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key")}

	write := func(path string, data []byte) {
		t.Helper()

		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	client, clientKey, err := catest.NewIssuer(t, oldCA, now).IssueNewKey(ca.KeyRequest{CommonName: "client", Profile: ca.ProfilePeer})
	if err != nil {
		t.Fatal(err)
	}

	write(files.CA, oldCA.CertPEM)
	write(files.Cert, client.PEM)
	write(files.Key, clientKey)

	addr := serve(t, newCA, oldCA)
	creds := files.Credentials()

	handshake := func() error {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		conn, _, err := creds.ClientHandshake(ctx, addr, raw)
		if err == nil {
			conn.Close()
		}

		return err
	}

	if err := handshake(); err == nil {
		t.Fatal("a server certificate of a CA not in the file was accepted")
	}

	write(files.CA, append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...))

	if err := handshake(); err != nil {
		t.Fatalf("the CA added to the file is not trusted by the same credentials: %v", err)
	}
}

// serve runs a TLS server on loopback with a certificate of serverCA for
// 127.0.0.1 that requires a client certificate of clientCA.
func serve(t *testing.T, serverCA, clientCA *ca.CA) string {
	t.Helper()

	issued, key, err := catest.NewIssuer(t, serverCA, time.Now()).IssueNewKey(ca.KeyRequest{
		CommonName: "etcd", Hosts: []string{"127.0.0.1"}, Profile: ca.ProfileServer,
	})
	if err != nil {
		t.Fatal(err)
	}

	pair, err := tls.X509KeyPair(issued.PEM, key)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(clientCA.Cert)

	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"}, // as etcd, and as gRPC requires
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { l.Close() })

	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}

			go func() {
				defer c.Close()

				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()

	return l.Addr().String()
}
