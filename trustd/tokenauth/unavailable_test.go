package tokenauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// downStore is a shared store that cannot answer (etcd without quorum).
type downStore struct{ tokenstore.Store }

func (downStore) Get(context.Context, string) (tokenstore.Record, error) {
	return tokenstore.Record{}, tokenstore.ErrUnavailable
}

func (downStore) Use(context.Context, string, time.Time) (tokenstore.Record, error) {
	return tokenstore.Record{}, tokenstore.ErrUnavailable
}

// TestStoreUnavailable checks that stored tokens fail closed, with an error
// that says why, while the machine config's token keeps working.
func TestStoreUnavailable(t *testing.T) {
	a, err := tokenauth.New(tokenauth.Config{
		Static: mustToken(t, "static.aaaaaaaaaaaaaaaa"),
		Store:  downStore{tokenstore.NewMemory(0)},
		Clock:  clock.NewFake(testutil.Epoch),
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()

	g, err := a.Authenticate(ctx, mustToken(t, "static.aaaaaaaaaaaaaaaa"))
	if err != nil || !g.Static {
		t.Fatalf("static token: %+v, %v", g, err)
	}

	if err = a.Consume(ctx, g); err != nil {
		t.Fatalf("static token consume: %v", err)
	}

	if _, err = a.Authenticate(ctx, mustToken(t, "active."+secret)); !errors.Is(err, trustd.ErrStoreUnavailable) {
		t.Fatalf("stored token: %v, want ErrStoreUnavailable", err)
	}

	if err = a.Consume(ctx, trustd.Grant{TokenID: "active"}); !errors.Is(err, trustd.ErrStoreUnavailable) {
		t.Fatalf("stored token consume: %v, want ErrStoreUnavailable", err)
	}
}
