package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/machined/localcluster"
)

// checkPeerPortAdmitsPeersOnly calls a member's peer port with each of its
// node's etcd certificates, all from the one etcd CA: the peer certificate
// is served (the members of the cluster use it), the client certificate
// (which trustd's user holds) and the server certificate are refused.
func checkPeerPortAdmitsPeersOnly(t *testing.T, c *localcluster.Cluster, cp localcluster.Node) {
	pki := filepath.Join(c.StatePath(cp), "etcd", "pki")
	addr := net.JoinHostPort(cp.Address, "2380")

	if err := peerPortGet(pki, "peer", addr); err != nil {
		t.Fatalf("the peer certificate: %v", err)
	}

	for _, name := range []string{"client", "server"} {
		if err := peerPortGet(pki, name, addr); err == nil {
			t.Errorf("the peer port %s served the %s certificate", addr, name)
		} else {
			t.Logf("%s certificate refused: %v", name, err)
		}
	}
}

// peerPortGet asks addr for etcd's version over the peer port with the
// pair name of pki.
func peerPortGet(pki, name, addr string) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, name+".crt"), filepath.Join(pki, name+".key"))
	if err != nil {
		return fmt.Errorf("test setup: %w", err)
	}

	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return fmt.Errorf("test setup: %w", err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}

	resp, err := hc.Get("https://" + addr + "/version")
	if err != nil {
		return err
	}
	defer resp.Body.Close()

	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}

	return nil
}
