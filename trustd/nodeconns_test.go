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
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

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
// worker does. The metrics are trustd's heap and stacks in use, and its
// resident memory, per connection; in "watch" also what trustd allocates
// per connection to push a revocation to every watch at once. Run it
// alone:
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

	heap0, stack0, rss0 := memory()
	c := startNodeClients(b, n, mode)
	heap1, stack1, rss1 := memory()

	if path := os.Getenv("TRUSTD_BENCH_HEAP"); path != "" {
		path += "." + mode
		f, _ := os.Create(path)
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}

	if mode == "watch" {
		b.ReportMetric(float64(c.pushAllocated(b))/n, "push-alloc-B/conn")
	}

	b.ReportMetric(float64(heap1-heap0)/n, "heap-B/conn")
	b.ReportMetric(float64(stack1-stack0)/n, "stack-B/conn")
	b.ReportMetric(float64(rss1-rss0)/n, "rss-B/conn")
}

// TestRevocationPushAllocatesLittle: a revocation pushed to many watches
// at once allocates a few KiB per connection in trustd. Each connection
// held a write buffer of gRPC's default 32 KiB while the push lasted, so
// a push to the 3,300 workers of a control plane allocated 104 MiB, and
// every trustd collected in the middle of it.
func TestRevocationPushAllocatesLittle(t *testing.T) {
	const n = 400

	c := startNodeClients(t, n, "watch")

	if perConn := c.pushAllocated(t) / n; perConn > 12<<10 {
		t.Fatalf("the push allocated %d bytes per connection, want a few KiB", perConn)
	}
}

// nodeClients are n node clients in another process (TestNodeClients),
// connected to a trustd of their own.
type nodeClients struct {
	feed  *trustd.RevocationFeed
	lines *bufio.Reader
}

// startNodeClients starts a trustd whose revocation list is a feed, and n
// clients in mode ("call" or "watch") in another process, and returns once
// every client is connected; the clients leave at the end of tb.
func startNodeClients(tb testing.TB, n int, mode string) *nodeClients {
	tb.Helper()

	feed := &trustd.RevocationFeed{}
	e := trustdtest.Start(tb, trustdtest.Options{GateOpen: true, Revocations: feed})
	crt, key := trustdtest.ServerCertificate(tb, e.CA, "127.0.1.7")
	dir := tb.TempDir()

	for name, data := range map[string][]byte{"crt": crt, "key": key, "ca": e.CA.CertPEM} {
		if err := os.WriteFile(dir+"/"+name, data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run", "^TestNodeClients$")
	cmd.Env = append(os.Environ(), envClients+"="+strings.Join([]string{e.Addr, dir, strconv.Itoa(n), mode}, ","))
	cmd.Stderr = os.Stderr

	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()

	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}

	tb.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })

	lines := bufio.NewReader(out)

	if line, err := lines.ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		tb.Fatalf("clients: %q, %v", line, err)
	}

	if st := trustd.ConnStats(e.Server); st.Proven != n {
		tb.Fatalf("connection stats %+v, want %d proven", st, n)
	}

	return &nodeClients{feed: feed, lines: lines}
}

// pushAllocated is what trustd allocates while it pushes a revocation to
// every watch: from the feed's change until the clients say that each of
// their watches has it.
func (c *nodeClients) pushAllocated(tb testing.TB) uint64 {
	tb.Helper()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc

	c.feed.Set(1, []*revocations.Revocation{{Serial: "1a2b3c", NotAfter: timestamppb.New(time.Now().Add(time.Hour))}})

	if line, err := c.lines.ReadString('\n'); err != nil || !strings.HasPrefix(line, "pushed") {
		tb.Fatalf("clients: %q, %v", line, err)
	}

	runtime.ReadMemStats(&ms)

	return ms.TotalAlloc - before
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

	// pushed counts the watches that have the list pushed after "ready".
	var pushed sync.WaitGroup

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

			pushed.Add(1)

			go func() {
				if _, err := watch.Recv(); err == nil {
					pushed.Done()
				}
			}()
		}
	}

	fmt.Println("ready")

	if parts[3] == "watch" {
		pushed.Wait()
		fmt.Println("pushed")
	}

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
