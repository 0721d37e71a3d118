package trustd_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// noRevocations is an empty revocation list: it makes trustd ask for
// client certificates, as it does on a control plane.
type noRevocations struct{}

func (noRevocations) Snapshot() trustd.RevocationSnapshot {
	return trustd.RevocationSnapshot{Changed: make(chan struct{})}
}

// dialNode connects to addr from source with the node pair (certPEM,
// keyPEM), trusting roots.
func dialNode(addr, source string, roots *x509.CertPool, certPEM, keyPEM []byte) (*grpc.ClientConn, error) {
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: trustdtest.ListenIP, MinVersion: tls.VersionTLS13}

	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}

		tlsConfig.Certificates = []tls.Certificate{pair}
	}

	return grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)), grpcopt.DialFrom(source))
}

// TestNodeConnectionsAreCountedApart: a connection whose client presents
// a node certificate counts against the nodes' caps, one without against
// the anonymous caps.
func TestNodeConnectionsAreCountedApart(t *testing.T) {
	e := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: noRevocations{}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	crt, key := trustdtest.ServerCertificate(t, e.CA, "127.0.1.7")

	node, err := dialNode(e.Addr, "127.0.1.7", e.CAs.Pool(), crt, key)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()

	if _, err := revocations.NewNodeRevocationServiceClient(node).Serials(ctx, &revocations.SerialsRequest{}); err != nil {
		t.Fatal(err)
	}

	stranger := e.Dial(t, "127.0.1.8")
	if _, err := healthpb.NewHealthClient(stranger).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	if st := trustd.ConnStats(e.Server); st.Proven != 1 || st.Open != 1 {
		t.Fatalf("connection stats %+v, want 1 proven (the node) and 1 open anonymous (the stranger)", st)
	}
}

// envClients names the variables that make the test binary the clients of
// BenchmarkNodeConnectionMemory.
const envClients = "TRUSTD_BENCH_NODE_CLIENTS"

// BenchmarkNodeConnectionMemory measures what one kept node connection
// costs trustd: n clients in another process connect with a node
// certificate, each from its own address, make a call and stay
// connected; in "watch" each also holds a revocation watch open, as every
// worker does. The metric is trustd's heap and stacks in use, and its
// resident memory, per connection. Run it alone:
//
//	go test ./trustd -run '^$' -bench NodeConnectionMemory -benchtime 1x
func BenchmarkNodeConnectionMemory(b *testing.B) {
	for _, mode := range []string{"call", "watch"} {
		b.Run(mode, func(b *testing.B) { benchNodeConnections(b, mode) })
	}
}

// benchNodeConnections is BenchmarkNodeConnectionMemory with the clients
// in mode ("call" or "watch").
func benchNodeConnections(b *testing.B, mode string) {
	const n = 2000

	e := trustdtest.Start(b, trustdtest.Options{GateOpen: true, Revocations: noRevocations{}})
	crt, key := trustdtest.ServerCertificate(b, e.CA, "127.0.1.7")
	dir := b.TempDir()

	for name, data := range map[string][]byte{"crt": crt, "key": key, "ca": e.CA.CertPEM} {
		if err := os.WriteFile(dir+"/"+name, data, 0o600); err != nil {
			b.Fatal(err)
		}
	}

	heap0, stack0, rss0 := memory()

	cmd := exec.Command(os.Args[0], "-test.run", "^TestNodeClients$")
	cmd.Env = append(os.Environ(), envClients+"="+strings.Join([]string{e.Addr, dir, strconv.Itoa(n), mode}, ","))
	cmd.Stderr = os.Stderr

	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()

	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}

	defer func() { _ = in.Close(); _ = cmd.Wait() }()

	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		b.Fatalf("clients: %q, %v", line, err)
	}

	heap1, stack1, rss1 := memory()

	if path := os.Getenv("TRUSTD_BENCH_HEAP"); path != "" {
		path += "." + mode
		f, _ := os.Create(path)
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}

	if st := trustd.ConnStats(e.Server); st.Proven != n {
		b.Fatalf("connection stats %+v, want %d proven", st, n)
	}

	b.ReportMetric(float64(heap1-heap0)/n, "heap-B/conn")
	b.ReportMetric(float64(stack1-stack0)/n, "stack-B/conn")
	b.ReportMetric(float64(rss1-rss0)/n, "rss-B/conn")
}

// memory is the heap in use after a collection, the stacks, and VmRSS.
func memory() (heap, stack, rss int64) {
	runtime.GC()

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	status, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}

	return int64(ms.HeapInuse), int64(ms.StackInuse), rss
}

// TestNodeClients is the client side of BenchmarkNodeConnectionMemory,
// run in its own process; without its variable it is skipped.
func TestNodeClients(t *testing.T) {
	spec := os.Getenv(envClients)
	if spec == "" {
		t.Skip("the client process of BenchmarkNodeConnectionMemory")
	}

	parts := strings.Split(spec, ",")
	addr, dir := parts[0], parts[1]
	n, _ := strconv.Atoi(parts[2])
	crt, _ := os.ReadFile(dir + "/crt")
	key, _ := os.ReadFile(dir + "/key")
	caPEM, _ := os.ReadFile(dir + "/ca")

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for i := range n {
		source := fmt.Sprintf("127.3.%d.%d", 1+i/250, 1+i%250)

		conn, err := dialNode(addr, source, roots, crt, key)
		if err != nil {
			t.Fatal(err)
		}

		if _, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{}); err != nil {
			t.Fatalf("client %d from %s: %v", i, source, err)
		}

		if parts[3] == "watch" {
			watch, err := revocations.NewNodeRevocationServiceClient(conn).Watch(ctx, &revocations.WatchRequest{})
			if err == nil {
				_, err = watch.Recv()
			}

			if err != nil {
				t.Fatalf("watch %d from %s: %v", i, source, err)
			}
		}
	}

	fmt.Println("ready")

	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// TestSignedNodeIsKnown: once trustd has signed a certificate naming the
// caller's address, the listener knows that address as a node's, so the
// node's next connections do their handshake apart from strangers; a
// caller that was refused, or whose certificate names other addresses, is
// not known.
func TestSignedNodeIsKnown(t *testing.T) {
	e := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, tt := range []struct {
		source, named, token string
		known                bool
	}{
		{"127.0.1.9", "127.0.1.9", trustdtest.StaticToken, true},
		{"127.0.1.10", "127.0.1.10", "abcdef.0123456789abcdef", false},
	} {
		csr := catest.CSR(t, catest.Key(t, ca.Ed25519), &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: tt.named}, IPAddresses: []net.IP{net.ParseIP(tt.named)},
		})

		_, err := trustdtest.Call(ctx, e.Client(t, tt.source), tt.token, csr)
		if (err == nil) != tt.known || trustd.Knows(e.Server, tt.source) != tt.known {
			t.Errorf("caller %s: call %v, known %v; want known %v", tt.source, err, trustd.Knows(e.Server, tt.source), tt.known)
		}
	}
}

// TestKnowMarksAMember: an address trustd is told is a member's (Know)
// is known to its connection table; an invalid one changes nothing.
func TestKnowMarksAMember(t *testing.T) {
	e := trustdtest.Start(t, trustdtest.Options{GateOpen: true})

	if trustd.Knows(e.Server, "127.0.1.11") {
		t.Fatal("an address no one named is known")
	}

	e.Server.Know(netip.MustParseAddr("127.0.1.11"))
	e.Server.Know(netip.Addr{})

	if !trustd.Knows(e.Server, "127.0.1.11") {
		t.Fatal("a member's address trustd was told of is not known")
	}
}
