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
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

const secret = "0123456789abcdef" // storetest.NewRecord's secret

func mustToken(t *testing.T, s string) token.Token {
	t.Helper()

	tok, err := token.Parse(s)
	if err != nil {
		t.Fatal(err)
	}

	return tok
}

// fixture is a store with one token in each state, and an authenticator
// over it reading a fake clock at testutil.Epoch + 1h.
func fixture(t *testing.T) (*tokenauth.Authenticator, tokenstore.Store) {
	t.Helper()

	ctx := context.Background()
	store := tokenstore.NewMemory(0)

	for _, r := range []tokenstore.Record{
		storetest.NewRecord(t, "active", 0, 0),
		storetest.NewRecord(t, "single", 0, 1),
		storetest.NewRecord(t, "usedup", 0, 1),
		storetest.NewRecord(t, "revokd", 0, 0),
		storetest.NewRecord(t, "expird", -25*time.Hour, 0),
	} {
		if err := store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	now := testutil.Epoch.Add(time.Hour)

	if _, err := store.Use(ctx, "usedup", now); err != nil {
		t.Fatal(err)
	}

	if _, err := store.Revoke(ctx, "revokd", now); err != nil {
		t.Fatal(err)
	}

	workerSANs, err := sanpolicy.Parse([]string{"worker-*.example"})
	if err != nil {
		t.Fatal(err)
	}

	a, err := tokenauth.New(tokenauth.Config{
		Static:     mustToken(t, "static.aaaaaaaaaaaaaaaa"),
		StaticSANs: workerSANs,
		Store:      store,
		Clock:      clock.NewFake(now),
	})
	if err != nil {
		t.Fatal(err)
	}

	return a, store
}

func TestAuthenticate(t *testing.T) {
	a, _ := fixture(t)

	tests := []struct {
		name   string
		tok    string
		static bool
		want   error
	}{
		{name: "static", tok: "static.aaaaaaaaaaaaaaaa", static: true},
		{name: "static id, wrong secret", tok: "static.aaaaaaaaaaaaaaab", want: trustd.ErrInvalidToken},
		{name: "stored", tok: "active." + secret},
		{name: "stored, wrong secret", tok: "active.0123456789abcdee", want: trustd.ErrInvalidToken},
		{name: "unknown id", tok: "zzzzzz." + secret, want: trustd.ErrInvalidToken},
		{name: "used up", tok: "usedup." + secret, want: tokenstore.ErrUsedUp},
		{name: "revoked", tok: "revokd." + secret, want: tokenstore.ErrRevoked},
		{name: "expired", tok: "expird." + secret, want: tokenstore.ErrExpired},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := a.Authenticate(context.Background(), mustToken(t, tt.tok))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}

				if g.Static != tt.static || g.TokenID != tt.tok[:token.IDLength] {
					t.Fatalf("grant = %+v", g)
				}

				// The static token obtains the config's worker names.
				if tt.static && !g.AllowedSANs.PermitsDNS("worker-1.example") {
					t.Fatalf("static grant allows %v, want the worker SANs", g.AllowedSANs.Strings())
				}

				return
			}

			if !errors.Is(err, tt.want) || !errors.Is(err, trustd.ErrInvalidToken) {
				t.Fatalf("err = %v, want %v wrapped in ErrInvalidToken", err, tt.want)
			}
		})
	}
}

// TestUnknownAndWrongLookAlike: the caller-visible error of an unknown id and
// of a wrong secret must be the same text.
func TestUnknownAndWrongLookAlike(t *testing.T) {
	a, _ := fixture(t)

	_, unknown := a.Authenticate(context.Background(), mustToken(t, "zzzzzz."+secret))
	_, wrong := a.Authenticate(context.Background(), mustToken(t, "active.0123456789abcdee"))

	if unknown == nil || wrong == nil || unknown.Error() != wrong.Error() {
		t.Fatalf("unknown id: %v; wrong secret: %v", unknown, wrong)
	}
}

func TestGrantCarriesPolicy(t *testing.T) {
	a, _ := fixture(t)

	g, err := a.Authenticate(context.Background(), mustToken(t, "active."+secret))
	if err != nil {
		t.Fatal(err)
	}

	if g.AllowedSANs.Unrestricted() || !g.AllowedSANs.PermitsDNS("node-1.example") || g.AllowedSANs.PermitsDNS("evil.example") {
		t.Fatalf("policy not carried: %v", g.AllowedSANs.Strings())
	}
}

func TestConsume(t *testing.T) {
	a, store := fixture(t)
	ctx := context.Background()

	g, err := a.Authenticate(ctx, mustToken(t, "single."+secret))
	if err != nil {
		t.Fatal(err)
	}

	// Two requests authenticated with the same single-use token: the
	// second Consume must lose.
	if err = a.Consume(ctx, g); err != nil {
		t.Fatal(err)
	}

	if err = a.Consume(ctx, g); !errors.Is(err, trustd.ErrInvalidToken) || !errors.Is(err, tokenstore.ErrUsedUp) {
		t.Fatalf("second Consume: %v", err)
	}

	if r, _ := store.Get(ctx, "single"); r.Uses != 1 {
		t.Fatalf("uses = %d", r.Uses)
	}

	static := trustd.Grant{TokenID: "static", Static: true}
	for range 3 {
		if err = a.Consume(ctx, static); err != nil {
			t.Fatalf("static token consumed: %v", err)
		}
	}
}

// brokenStore fails every read, as a store whose disk went away would.
type brokenStore struct{ tokenstore.Store }

func (brokenStore) Get(context.Context, string) (tokenstore.Record, error) {
	return tokenstore.Record{}, errors.New("disk on fire")
}

func (brokenStore) Use(context.Context, string, time.Time) (tokenstore.Record, error) {
	return tokenstore.Record{}, errors.New("disk on fire")
}

func TestStoreFailureIsNotARefusal(t *testing.T) {
	a, err := tokenauth.New(tokenauth.Config{Store: brokenStore{tokenstore.NewMemory(0)}})
	if err != nil {
		t.Fatal(err)
	}

	if _, err = a.Authenticate(context.Background(), mustToken(t, "active."+secret)); err == nil || errors.Is(err, trustd.ErrInvalidToken) {
		t.Fatalf("Authenticate: %v, want an internal error", err)
	}

	if err = a.Consume(context.Background(), trustd.Grant{TokenID: "active"}); err == nil || errors.Is(err, trustd.ErrInvalidToken) {
		t.Fatalf("Consume: %v, want an internal error", err)
	}
}

func TestNewNeedsATokenSource(t *testing.T) {
	if _, err := tokenauth.New(tokenauth.Config{}); err == nil {
		t.Fatal("New accepted no static token and no store")
	}
}
