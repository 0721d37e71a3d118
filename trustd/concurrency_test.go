package trustd_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestConcurrentSingleUse: 100 concurrent requests with one single-use token,
// through the real server and the bbolt store, yield exactly one
// certificate, and every other request is refused as unauthenticated.
func TestConcurrentSingleUse(t *testing.T) {
	const n = 100

	store, err := boltstore.Open(boltstore.Config{Path: filepath.Join(t.TempDir(), "tokens.db")})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { store.Close() })

	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Store: store})
	ctx := testContext(t)
	tok := env.CreateToken(t, time.Hour, 1)
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	// A few connections, so the calls really run in parallel on the server
	// rather than queueing behind one connection's stream limit.
	clients := make([]func() error, 4)
	for i := range clients {
		c := env.Client(t, "")
		clients[i] = func() error { _, err := trustdtest.Call(ctx, c, tok, csr); return err }
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		byCode = map[codes.Code]int{}
	)

	for i := range n {
		wg.Go(func() {
			err := clients[i%len(clients)]()

			mu.Lock()
			defer mu.Unlock()

			byCode[status.Code(err)]++
		})
	}

	wg.Wait()

	if byCode[codes.OK] != 1 || byCode[codes.Unauthenticated] != n-1 {
		t.Fatalf("results by code: %v; want 1 OK and %d Unauthenticated", byCode, n-1)
	}

	// Every decision is accounted for: the issuance in its own record, the
	// refusals (all from one source) in one record in full and a summary
	// that counts the others, written at the latest when the server stops.
	env.Stop()

	if d := trustdtest.Count(env.Audit.Records(), nil); d.Issued != 1 || d.Refused != n-1 || d.Full != 1 || d.Summaries != 1 {
		t.Fatalf("audit accounts for %+v; want 1 issued and %d refused, 1 in full and 1 summary", d, n-1)
	}

	if r, _ := store.Get(ctx, tok[:6]); r.Uses != 1 {
		t.Fatalf("uses = %d", r.Uses)
	}
}
