package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// tokenWrites creates a token every 200 ms through each control plane in
// turn while a rolling upgrade goes on: etcd writes, each acknowledged
// only once a quorum has it. Every acknowledged one must be there after.
type tokenWrites struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  []string
	failed map[string]int // by gRPC code
	first  []string       // the first refusals, for the log
}

// startTokenWrites starts the writer.
func startTokenWrites(t *testing.T, a admin, cps []localcluster.Node) *tokenWrites {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	w := &tokenWrites{cancel: cancel, failed: map[string]int{}}
	t.Cleanup(w.stop)

	clients := make([]tokens.TokenServiceClient, len(cps))
	for i, cp := range cps {
		clients[i] = tokens.NewTokenServiceClient(a.conn(t, cp.Address))
	}

	w.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			w.write(ctx, clients[i%len(clients)], i)

			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	})

	return w
}

func (w *tokenWrites) write(ctx context.Context, tc tokens.TokenServiceClient, i int) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	resp, err := tc.Create(cctx, &tokens.CreateRequest{MaxUses: 1, Description: fmt.Sprintf("written during the upgrade, %d", i)})
	if ctx.Err() != nil {
		return // stopped: neither acknowledged nor refused
	}

	w.mu.Lock()
	defer w.mu.Unlock()

	if err != nil {
		w.failed[status.Code(err).String()]++

		if len(w.first) < 3 {
			w.first = append(w.first, time.Now().Format("15:04:05.000")+" "+err.Error())
		}

		return
	}

	id, _, _ := strings.Cut(resp.GetMessages()[0].GetToken(), ".")
	w.acked = append(w.acked, id)
}

func (w *tokenWrites) stop() {
	w.cancel()
	w.wg.Wait()
}

// check stops the writer and fails the test if a token whose creation was
// acknowledged is not in listed (the tokens as a control plane lists them
// after the upgrade).
func (w *tokenWrites) check(t *testing.T, listed map[string]uint32) {
	t.Helper()
	w.stop()

	var lost []string

	for _, id := range w.acked {
		if _, ok := listed[id]; !ok {
			lost = append(lost, id)
		}
	}

	t.Logf("etcd writes during the upgrade: %d tokens created and acknowledged, %d lost, refused by code %v; first refusals: %q",
		len(w.acked), len(lost), w.failed, w.first)

	if len(w.acked) == 0 {
		t.Error("no token creation was acknowledged during the upgrade")
	}

	if len(lost) > 0 {
		t.Errorf("%d acknowledged token creations lost in the upgrade: %v", len(lost), lost)
	}
}
