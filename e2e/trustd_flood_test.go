package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// Size of the flood of TestTrustdRefusalFlood: more failing sources than
// trustd's failure table holds, each with a few bad-token calls.
const (
	floodSources   = trustd.DefaultMaxSources + 240
	floodPerSource = 4
	floodWorkers   = 16
	// floodTimeout bounds the flood; on a busy machine it takes a minute
	// or two.
	floodTimeout = 5 * time.Minute
)

// TestTrustdRefusalFlood: after 40,000 bad-token calls from more sources
// than trustd's failure table holds, a node that never failed joins with a
// valid token, every issuance record from before the flood is still in
// audit.log, and every refusal is accounted for in refusals.log in a
// bounded number of lines.
func TestTrustdRefusalFlood(t *testing.T) {
	needBinaries(t)

	n := newNode(t, "127.0.1.90")
	proc := n.start(t)
	n.waitServing(t)

	ctx := testContext(t)
	tok := n.cfg.TrustdToken().Reveal()

	var serials []string

	// The static token obtains the caller's own address only.
	issue := func(source string) error {
		resp, err := trustdtest.Call(ctx, n.security(t, source), tok, trustdtest.CSR(t, ca.Ed25519, source, source))
		if err != nil {
			return err
		}

		serials = append(serials, checkIssued(t, n, resp).SerialNumber.Text(16))

		return nil
	}

	for i := range 3 {
		if err := issue(fmt.Sprintf("127.0.1.%d", 91+i)); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	refused := n.flood(t, ctx)
	t.Logf("%d bad-token calls from %d sources in %s", refused, floodSources, time.Since(start).Round(time.Millisecond))

	if err := issue("127.0.1.99"); err != nil {
		t.Errorf("a source that never failed, after the flood: %v", err)
	}

	if err := proc.stop(); err != nil {
		t.Fatalf("trustd stopped with %v", err)
	}

	issuedRecs, refusedRecs := n.auditTrail(t)
	kept := map[string]bool{}

	for _, f := range []string{"audit.log", "refusals.log"} {
		if st, err := os.Stat(filepath.Join(n.state, "trustd", f)); err == nil {
			t.Logf("%s: %d bytes", f, st.Size())
		}
	}

	t.Logf("%d records in audit.log, %d lines in refusals.log", len(issuedRecs), len(refusedRecs))

	for _, r := range issuedRecs {
		if r["decision"] == "issued" {
			kept[fmt.Sprint(r["serial"])] = true
		}
	}

	for _, s := range serials {
		if !kept[s] {
			t.Errorf("the issuance record of %s is gone from audit.log", s)
		}
	}

	if _, counted := accounted(refusedRecs); counted != refused {
		t.Errorf("refusals.log accounts for %d refusals, want %d", counted, refused)
	}

	// Two lines per tracked source and interval, plus one; the flood may
	// span a few intervals.
	if limit := 3 * (2*trustd.MaxRefusalSources + 1); len(refusedRecs) > limit {
		t.Errorf("%d lines in refusals.log for %d refusals, want at most %d", len(refusedRecs), refused, limit)
	}
}

// flood makes floodPerSource bad-token calls from each of floodSources
// loopback addresses (127.3.0.0/16), one connection per source, closed
// after its calls. It returns the number of calls trustd refused.
func (n *trustdNode) flood(t *testing.T, ctx context.Context) int {
	t.Helper()

	ctx, cancel := context.WithTimeout(ctx, floodTimeout)
	defer cancel()

	creds := credentials.NewTLS(&tls.Config{RootCAs: n.cfg.AcceptedCAs().Pool(), ServerName: n.ip, MinVersion: tls.VersionTLS13})
	csr := trustdtest.CSR(t, ca.Ed25519, "flood", "flood")

	var (
		refused atomic.Int64
		next    atomic.Int64
		wg      sync.WaitGroup
	)

	for range floodWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < floodSources && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				source := fmt.Sprintf("127.3.%d.%d", i/250, 1+i%250)
				if err := n.floodFrom(ctx, creds, source, csr, &refused); err != nil {
					t.Errorf("flood from %s: %v", source, err)
					cancel()
				}
			}
		})
	}

	wg.Wait()

	if ctx.Err() != nil && !t.Failed() {
		t.Fatalf("the flood did not end within %s", floodTimeout)
	}

	return int(refused.Load())
}

func (n *trustdNode) floodFrom(ctx context.Context, creds credentials.TransportCredentials, source string, csr []byte, refused *atomic.Int64) error {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}

	conn, err := grpc.NewClient(n.listen, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		return err
	}
	defer conn.Close()

	c := securityapi.NewSecurityServiceClient(conn)

	for range floodPerSource {
		_, err := trustdtest.Call(ctx, c, "zzzzzz.zzzzzzzzzzzzzzzz", csr)

		switch status.Code(err) {
		case codes.Unauthenticated, codes.ResourceExhausted:
			refused.Add(1)
		case codes.OK:
			return errors.New("a bad token obtained a certificate")
		default:
			return err
		}
	}

	return nil
}
