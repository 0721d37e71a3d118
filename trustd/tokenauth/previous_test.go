package tokenauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// TestPreviousTokenOverlap walks a rotation's overlap on a fake clock: the
// previous token works beside the new one until its expiry and is refused
// from then on, although the config still lists it; the new one keeps
// working throughout. With and without a token store.
func TestPreviousTokenOverlap(t *testing.T) {
	for name, store := range map[string]tokenstore.Store{"static only": nil, "with store": tokenstore.NewMemory(0)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := testutil.Epoch
			clk := clock.NewFake(now)
			old, fresh := mustToken(t, "oldtok.aaaaaaaaaaaaaaaa"), mustToken(t, "newtok.bbbbbbbbbbbbbbbb")
			older := mustToken(t, "oldest.cccccccccccccccc")

			sans, err := sanpolicy.Parse([]string{"worker-*.example"})
			if err != nil {
				t.Fatal(err)
			}

			a, err := tokenauth.New(tokenauth.Config{
				Static: fresh, StaticSANs: sans, Store: store, Clock: clk,
				Previous: []tokenauth.Previous{
					{Token: older, Expires: now.Add(-time.Second)}, // an overlap already over
					{Token: old, Expires: now.Add(time.Hour)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}

			wantGrant(ctx, t, a, fresh, false, sans)
			wantGrant(ctx, t, a, old, true, sans)
			wantRefused(ctx, t, a, older, "a previous token past its expiry")
			wantRefused(ctx, t, a, mustToken(t, "oldtok.aaaaaaaaaaaaaaab"), "a previous token's id with a wrong secret")

			clk.Advance(time.Hour - time.Nanosecond)
			wantGrant(ctx, t, a, old, true, sans)

			clk.Advance(time.Nanosecond)
			wantRefused(ctx, t, a, old, "the previous token at its expiry")
			wantGrant(ctx, t, a, fresh, false, sans)

			// A previous token dropped from the config is refused at once.
			clk.Set(now)
			a.SetStatic(fresh, sans, nil)
			wantRefused(ctx, t, a, old, "a previous token dropped")
		})
	}
}

func wantGrant(ctx context.Context, t *testing.T, a *tokenauth.Authenticator, tok token.Token, previous bool, sans *sanpolicy.Policy) {
	t.Helper()

	g, err := a.Authenticate(ctx, tok)
	if err != nil {
		t.Fatalf("%s: %v", tok, err)
	}

	if !g.Static || g.Previous != previous || g.TokenID != tok.ID() || g.AllowedSANs != sans {
		t.Fatalf("%s: grant %+v, want static, previous %v, its id and the worker SANs", tok, g, previous)
	}

	if err := a.Consume(ctx, g); err != nil {
		t.Fatalf("%s: consume: %v", tok, err)
	}
}

func wantRefused(ctx context.Context, t *testing.T, a *tokenauth.Authenticator, tok token.Token, what string) {
	t.Helper()

	if g, err := a.Authenticate(ctx, tok); !errors.Is(err, trustd.ErrInvalidToken) {
		t.Fatalf("%s: %+v, %v; want %v", what, g, err, trustd.ErrInvalidToken)
	}
}

// TestPreviousTokenStoreUnavailable: like the current static token, a
// previous one needs no store while its overlap lasts, and is refused as
// an invalid token once it is over.
func TestPreviousTokenStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(testutil.Epoch)
	old := mustToken(t, "oldtok.aaaaaaaaaaaaaaaa")

	a, err := tokenauth.New(tokenauth.Config{
		Static: mustToken(t, "newtok.bbbbbbbbbbbbbbbb"), Store: downStore{tokenstore.NewMemory(0)}, Clock: clk,
		Previous: []tokenauth.Previous{{Token: old, Expires: testutil.Epoch.Add(time.Minute)}},
	})
	if err != nil {
		t.Fatal(err)
	}

	wantGrant(ctx, t, a, old, true, nil)

	clk.Advance(time.Minute)
	wantRefused(ctx, t, a, old, "the previous token after its overlap, store unavailable")
}
