package trustd_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
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

	issued := 0

	for _, rec := range env.Audit.Records() {
		if rec.String(trustd.AuditDecision) == trustd.DecisionIssued {
			issued++
		}
	}

	if len(env.Audit.Records()) != n || issued != 1 {
		t.Fatalf("%d audit records, %d issued; want %d and 1", len(env.Audit.Records()), issued, n)
	}

	if r, _ := store.Get(ctx, tok[:6]); r.Uses != 1 {
		t.Fatalf("uses = %d", r.Uses)
	}
}
