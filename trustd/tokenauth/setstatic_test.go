package tokenauth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
)

func TestSetStatic(t *testing.T) {
	a, _ := fixture(t)
	ctx := context.Background()
	old, fresh := mustToken(t, "static.aaaaaaaaaaaaaaaa"), mustToken(t, "newtok.bbbbbbbbbbbbbbbb")

	sans, err := sanpolicy.Parse([]string{"*.fresh.example"})
	if err != nil {
		t.Fatal(err)
	}

	a.SetStatic(fresh, sans, nil)

	g, err := a.Authenticate(ctx, fresh)
	if err != nil || !g.Static || g.AllowedSANs != sans {
		t.Fatalf("new static token: %+v, %v", g, err)
	}

	if _, err := a.Authenticate(ctx, old); !errors.Is(err, trustd.ErrInvalidToken) {
		t.Fatalf("old static token after SetStatic: %v", err)
	}

	// With a store, a zero token leaves only the store's tokens.
	a.SetStatic(token.Token{}, nil, nil)

	if _, err := a.Authenticate(ctx, fresh); !errors.Is(err, trustd.ErrInvalidToken) {
		t.Fatalf("static token after it was cleared: %v", err)
	}
}
