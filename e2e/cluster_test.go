package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
)

// The e2e tests' addresses: each apid process listens on its own loopback
// address, on the standard port, as nodes of one machine do.
var nodeIPs = []string{"127.0.2.1", "127.0.2.2", "127.0.2.3"}

// hangingIP is where a node that accepts connections and never answers listens.
const hangingIP = "127.0.2.4"

// timeout bounds each wait of the tests: generous, for a busy machine.
const timeout = 60 * time.Second

// apidNode is one apid process with the machined stand-in behind it, served
// from the test's process.
type apidNode struct {
	ip       string
	dir      string
	backend  *apidtest.Backend
	cmd      *exec.Cmd
	stderr   *logtest.Sink
	exited   chan struct{}
	exitErr  error
	certPath string
	keyPath  string
}

// cluster is three apid processes sharing a PKI; the third is a worker
// without an impersonator certificate. The file mode has no member list:
// every node is given the others, the stopped and the hanging node's
// addresses and the test's own (startCluster's others) as control-plane
// endpoints, the only other nodes it routes to.
type cluster struct {
	pki   *apidtest.PKI
	nodes []*apidNode
	known []string
}

func startCluster(t *testing.T, others ...string) *cluster {
	t.Helper()
	needBinaries(t)

	c := &cluster{pki: apidtest.NewPKI(t), known: append(append([]string{}, nodeIPs...), hangingIP, deadIP)}
	c.known = append(c.known, others...)

	for i, ip := range nodeIPs {
		c.nodes = append(c.nodes, c.start(t, ip, "node-"+string(rune('1'+i)), i < 2))
	}

	return c
}

func (c *cluster) start(t *testing.T, ip, hostname string, forwarding bool) *apidNode {
	t.Helper()

	n := &apidNode{ip: ip, dir: testutil.ShortTempDir(t), stderr: &logtest.Sink{}, exited: make(chan struct{})}
	n.backend = apidtest.StartBackend(t, apidtest.BackendConfig{Hostname: hostname, Socket: filepath.Join(n.dir, "machined.sock")})
	n.certPath, n.keyPath = c.pki.Server(t, ip).Write(t, n.dir, "apid")

	caPath := filepath.Join(n.dir, "ca.pem")
	if err := os.WriteFile(caPath, c.pki.CA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	args := []string{
		"--cert", n.certPath, "--key", n.keyPath, "--ca", caPath,
		"--machined-socket", n.backend.Socket(), "--listen", n.addr(),
		"--watch-interval", "100ms", "--shutdown-timeout", "2s",
	}

	for _, k := range c.known {
		args = append(args, "--node-name", k)
	}

	if forwarding {
		impCert, impKey := c.pki.Impersonator(t).Write(t, n.dir, "impersonator")
		args = append(args, "--impersonator-cert", impCert, "--impersonator-key", impKey, "--role", "controlplane")
	} else {
		args = append(args, "--role", "worker")
	}

	n.cmd = exec.Command(filepath.Join(binDir, "apid"), args...)
	n.cmd.Stderr = n.stderr

	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}

	go func() {
		n.exitErr = n.cmd.Wait()
		close(n.exited)
	}()

	t.Cleanup(func() {
		n.stop(t)

		if t.Failed() {
			t.Logf("apid %s log:\n%s", ip, n.stderr.String())
		}
	})

	n.waitServing(t)

	return n
}

func (n *apidNode) addr() string { return net.JoinHostPort(n.ip, strconv.Itoa(wire.APIDPort)) }

// waitServing waits for the process to say it serves, and to accept a
// connection.
func (n *apidNode) waitServing(t *testing.T) {
	t.Helper()

	deadline := time.Now().Add(timeout)
	for !strings.Contains(n.stderr.String(), "apid serving") {
		select {
		case <-n.exited:
			t.Fatalf("apid %s exited: %v\n%s", n.ip, n.exitErr, n.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}

		if time.Now().After(deadline) {
			t.Fatalf("apid %s did not start:\n%s", n.ip, n.stderr.String())
		}
	}
}

// stop sends SIGTERM and waits for a clean exit; it kills a process that
// does not stop in time. It reports the exit error.
func (n *apidNode) stop(t *testing.T) error {
	t.Helper()

	select {
	case <-n.exited:
		return n.exitErr
	default:
	}

	_ = n.cmd.Process.Signal(syscall.SIGTERM)

	select {
	case <-n.exited:
		return n.exitErr
	case <-time.After(timeout):
		_ = n.cmd.Process.Kill()
		<-n.exited

		return errors.New("apid did not stop on SIGTERM; killed")
	}
}

// hanging listens on hangingIP:50000, accepts connections and never
// answers them.
func hanging(t *testing.T) string {
	t.Helper()

	lis, err := net.Listen("tcp", net.JoinHostPort(hangingIP, strconv.Itoa(wire.APIDPort)))
	if err != nil {
		t.Fatal(err)
	}

	var held []net.Conn

	done := make(chan struct{})

	go func() {
		defer close(done)

		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}

			held = append(held, c)
		}
	}()

	t.Cleanup(func() {
		lis.Close()
		<-done

		for _, c := range held {
			c.Close()
		}
	})

	return hangingIP
}

func ctx(t *testing.T) context.Context {
	t.Helper()

	c, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)

	return c
}

// replaceFile writes data to path by rename, as certificate renewals do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()

	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
