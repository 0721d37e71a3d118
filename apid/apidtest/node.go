package apidtest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/routing"
	"github.com/aegis-os/aegis/internal/clock"
)

// NodeConfig configures an in-process node.
type NodeConfig struct {
	// IP is the loopback address the node listens on, on the port of
	// every node of its PKI (PKI.Listen); if another node has it, the
	// next free one. Its server certificate names it. Required.
	IP string
	// Hostname is the backend's node name, and the member name of the
	// node (its server certificate names it too). Empty means the address.
	Hostname string
	// Worker leaves the node without an impersonator certificate: it
	// forwards nothing.
	Worker bool
	// AcceptedCAs overrides the PKI's set.
	AcceptedCAs func() *ca.AcceptedSet
	// Logger receives apid's log. Nil discards.
	Logger *slog.Logger
	// Register adds more services to the backend (BackendConfig.Register).
	Register func(*grpc.Server)
	// Clock is apid's clock for certificate checks. Nil means the real one.
	Clock clock.Clock
	// Metrics receives apid's collectors. Nil means none.
	Metrics prometheus.Registerer
}

// Node is an apid server and the backend behind it, in the test's process.
type Node struct {
	Server  *apid.Server
	Backend *Backend
	// Addr is host:port, the endpoint clients connect to.
	Addr string
	// IP is the node's address, the name `node`/`nodes` give it.
	IP string
	// Certificate is the node's server certificate, replaceable.
	Certificate *certs.KeyPair

	served chan struct{} // closed when Serve has returned
}

// StartNode starts a node at cfg.IP (or after it) on the cluster's port;
// it stops when the test ends.
func StartNode(tb testing.TB, p *PKI, cfg NodeConfig) *Node {
	tb.Helper()

	lis, ip := p.Listen(tb, cfg.IP)
	if cfg.Hostname == "" {
		cfg.Hostname = ip
	}

	n := &Node{
		Backend:     StartBackend(tb, BackendConfig{Hostname: cfg.Hostname, Register: cfg.Register}),
		Addr:        lis.Addr().String(),
		IP:          ip,
		Certificate: p.Server(tb, serverHosts(ip, cfg.Hostname)...).KeyPair(tb),
	}

	role := apid.RoleControlPlane
	if cfg.Worker {
		role = apid.RoleWorker
	}

	p.AddMember(cfg.Hostname, ip, role)

	accepted := cfg.AcceptedCAs
	if accepted == nil {
		set := p.Accepted(tb)
		accepted = func() *ca.AcceptedSet { return set }
	}

	acfg := apid.Config{
		Certificate:    n.Certificate,
		AcceptedCAs:    accepted,
		MachinedSocket: n.Backend.Socket(),
		Self:           []string{ip},
		Members:        p.Members(),
		Role:           role,
		NodePort:       p.NodePort(),
		Logger:         cfg.Logger,
		Clock:          cfg.Clock,
		Metrics:        cfg.Metrics,
	}
	if !cfg.Worker {
		acfg.ForwardCertificate = p.Impersonator(tb).KeyPair(tb)
	}

	var err error
	if n.Server, err = apid.New(acfg); err != nil {
		tb.Fatalf("apid.New: %v", err)
	}

	n.served = make(chan struct{})

	go func() {
		defer close(n.served)

		n.Server.Serve(lis) //nolint:errcheck // ends with Stop
	}()

	tb.Cleanup(n.Stop)

	return n
}

// serverHosts are what a node's server certificate names: its address,
// and its hostname when that is a DNS name.
func serverHosts(ip, hostname string) []string {
	if hostname == ip {
		return []string{ip}
	}

	if name, err := routing.Canonical(hostname); err == nil && name == hostname {
		return []string{ip, hostname}
	}

	return []string{ip}
}

// Stop stops the node at once and waits until Serve has returned, its
// last log lines (the summaries of refusals) written.
func (n *Node) Stop() {
	n.Server.Stop()
	<-n.served
}

// Shutdown stops the node gracefully within timeout.
func (n *Node) Shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	n.Server.Shutdown(ctx)
}

// TalosClient returns a Talos machinery client of endpoint (host or
// host:port) presenting tlsCfg; it is closed when the test ends.
func TalosClient(tb testing.TB, endpoint string, tlsCfg *tls.Config) *client.Client {
	tb.Helper()

	c, err := client.New(context.Background(), client.WithEndpoints(endpoint), client.WithTLSConfig(tlsCfg))
	if err != nil {
		tb.Fatalf("client: %v", err)
	}

	tb.Cleanup(func() { c.Close() }) //nolint:errcheck // closing a client in cleanup

	return c
}
