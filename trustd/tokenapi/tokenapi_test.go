package tokenapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/tokenapi"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

type fixture struct {
	svc   *tokenapi.Service
	store *tokenstore.Memory
	clk   *clock.Fake
	log   *trustdtest.Recorder
}

func newFixture(t *testing.T, maxRecords int) *fixture {
	t.Helper()

	f := &fixture{store: tokenstore.NewMemory(maxRecords), clk: clock.NewFake(testutil.Epoch), log: trustdtest.NewRecorder()}

	svc, err := tokenapi.New(tokenapi.Config{Store: f.store, Clock: f.clk, Logger: f.log.Logger()})
	if err != nil {
		t.Fatal(err)
	}

	f.svc = svc

	return f
}

func (f *fixture) create(t *testing.T, req *tokens.CreateRequest) *tokens.Created {
	t.Helper()

	resp, err := f.svc.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	if len(resp.GetMessages()) != 1 {
		t.Fatalf("%d messages", len(resp.GetMessages()))
	}

	return resp.GetMessages()[0]
}

func TestCreate(t *testing.T) {
	f := newFixture(t, 0)

	created := f.create(t, &tokens.CreateRequest{
		MaxUses:     1,
		AllowedSans: []string{"Node-*.Example", "10.5.0.0/24"},
		Description: "rack 4",
	})

	tok, err := token.Parse(created.GetToken())
	if err != nil {
		t.Fatalf("returned token %v: %v", tok, err)
	}

	info := created.GetInfo()
	if info.GetId() != tok.ID() || info.GetMaxUses() != 1 || info.GetDescription() != "rack 4" ||
		!slices.Equal(info.GetAllowedSans(), []string{"node-*.example", "10.5.0.0/24"}) {
		t.Fatalf("info = %v", info)
	}

	if got := info.GetExpires().AsTime().Sub(info.GetCreated().AsTime()); got != tokenapi.DefaultTTL {
		t.Fatalf("lifetime %s, want the default %s", got, tokenapi.DefaultTTL)
	}

	rec, err := f.store.Get(context.Background(), tok.ID())
	if err != nil {
		t.Fatal(err)
	}

	if !rec.MatchesSecret(tok.Secret()) || strings.Contains(fmt.Sprintf("%+v", rec), tok.Secret()) {
		t.Fatal("stored record does not verify the secret, or holds it")
	}

	// The secret is shown once: neither List nor the logs repeat it.
	list, err := f.svc.List(context.Background(), &tokens.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if strings.Contains(prototext.Format(list), tok.Secret()) {
		t.Fatal("List shows a secret")
	}

	for _, r := range f.log.Records() {
		if strings.Contains(fmt.Sprint(r.Attrs), tok.Secret()) {
			t.Fatalf("log holds a secret: %+v", r)
		}
	}

	if again := f.create(t, &tokens.CreateRequest{}); again.GetToken() == created.GetToken() {
		t.Fatal("two Creates returned the same token")
	}
}

func TestCreateRefusals(t *testing.T) {
	tests := []struct {
		name string
		req  *tokens.CreateRequest
	}{
		{name: "negative ttl", req: &tokens.CreateRequest{Ttl: durationpb.New(-time.Hour)}},
		{name: "ttl too short", req: &tokens.CreateRequest{Ttl: durationpb.New(500 * time.Millisecond)}},
		{name: "ttl too long", req: &tokens.CreateRequest{Ttl: durationpb.New(tokenapi.MaxTTL + time.Second)}},
		{name: "invalid duration", req: &tokens.CreateRequest{Ttl: &durationpb.Duration{Seconds: 1, Nanos: -1}}},
		{name: "bare wildcard SAN", req: &tokens.CreateRequest{AllowedSans: []string{"*"}}},
		{name: "bad CIDR", req: &tokens.CreateRequest{AllowedSans: []string{"10.5.0.1/24"}}},
		{name: "long description", req: &tokens.CreateRequest{Description: strings.Repeat("a", tokenstore.MaxDescriptionLength+1)}},
		{name: "control character", req: &tokens.CreateRequest{Description: "line\nbreak"}},
		{name: "invalid UTF-8", req: &tokens.CreateRequest{Description: "\xff"}},
	}

	f := newFixture(t, 0)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.svc.Create(context.Background(), tt.req); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
		})
	}

	if recs, _ := f.store.List(context.Background()); len(recs) != 0 {
		t.Fatalf("refused requests stored %d tokens", len(recs))
	}
}

func TestCreateFullStore(t *testing.T) {
	f := newFixture(t, 1)
	f.create(t, &tokens.CreateRequest{})

	if _, err := f.svc.Create(context.Background(), &tokens.CreateRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
}

func TestCreatePrunesEndedTokens(t *testing.T) {
	f := newFixture(t, 0)
	short := f.create(t, &tokens.CreateRequest{Ttl: durationpb.New(time.Hour)})

	f.clk.Advance(time.Hour + tokenapi.DefaultRetention - time.Second)
	f.create(t, &tokens.CreateRequest{})

	if _, err := f.store.Get(context.Background(), short.GetInfo().GetId()); err != nil {
		t.Fatal("token pruned before its retention ended")
	}

	f.clk.Advance(2 * time.Second)
	f.create(t, &tokens.CreateRequest{})

	if recs, _ := f.store.List(context.Background()); len(recs) != 2 {
		t.Fatalf("%d tokens listed, want the ended one pruned", len(recs))
	}
}

func TestRevoke(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	created := f.create(t, &tokens.CreateRequest{})
	id := created.GetInfo().GetId()

	auth, err := tokenauth.New(tokenauth.Config{Store: f.store, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}

	tok, _ := token.Parse(created.GetToken())
	if _, err = auth.Authenticate(ctx, tok); err != nil {
		t.Fatalf("new token does not authenticate: %v", err)
	}

	f.clk.Advance(time.Minute)

	resp, err := f.svc.Revoke(ctx, &tokens.RevokeRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}

	revokedAt := resp.GetMessages()[0].GetInfo().GetRevoked().AsTime()
	if !revokedAt.Equal(testutil.Epoch.Add(time.Minute)) {
		t.Fatalf("revoked at %v", revokedAt)
	}

	if _, err = auth.Authenticate(ctx, tok); err == nil {
		t.Fatal("revoked token authenticates")
	}

	f.clk.Advance(time.Minute)

	if resp, err = f.svc.Revoke(ctx, &tokens.RevokeRequest{Id: id}); err != nil || !resp.GetMessages()[0].GetInfo().GetRevoked().AsTime().Equal(revokedAt) {
		t.Fatalf("second Revoke: %v, %v", resp, err)
	}

	list, _ := f.svc.List(ctx, &tokens.ListRequest{})
	if ts := list.GetMessages()[0].GetTokens(); len(ts) != 1 || ts[0].GetRevoked() == nil {
		t.Fatalf("revoked token not listed as revoked: %v", ts)
	}

	for _, tt := range []struct {
		id   string
		code codes.Code
	}{
		{id: "zzzzzz", code: codes.NotFound},
		{id: "ZZZZZZ", code: codes.InvalidArgument},
		{id: "", code: codes.InvalidArgument},
	} {
		if _, err = f.svc.Revoke(ctx, &tokens.RevokeRequest{Id: tt.id}); status.Code(err) != tt.code {
			t.Errorf("Revoke(%q) = %v, want %s", tt.id, err, tt.code)
		}
	}
}

func TestListShowsUses(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	a := f.create(t, &tokens.CreateRequest{MaxUses: 3})
	f.clk.Advance(time.Second)
	b := f.create(t, &tokens.CreateRequest{})

	if _, err := f.store.Use(ctx, a.GetInfo().GetId(), f.clk.Now()); err != nil {
		t.Fatal(err)
	}

	list, err := f.svc.List(ctx, &tokens.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	ts := list.GetMessages()[0].GetTokens()
	if len(ts) != 2 || ts[0].GetId() != a.GetInfo().GetId() || ts[1].GetId() != b.GetInfo().GetId() {
		t.Fatalf("list = %v", ts)
	}

	if ts[0].GetUses() != 1 || ts[0].GetMaxUses() != 3 || ts[1].GetUses() != 0 {
		t.Fatalf("uses: %d/%d, %d", ts[0].GetUses(), ts[0].GetMaxUses(), ts[1].GetUses())
	}
}

func TestNewRefusals(t *testing.T) {
	if _, err := tokenapi.New(tokenapi.Config{}); err == nil {
		t.Fatal("New without a store succeeded")
	}

	if _, err := tokenapi.New(tokenapi.Config{Store: tokenstore.NewMemory(0), DefaultTTL: 2 * time.Hour, MaxTTL: time.Hour}); err == nil {
		t.Fatal("default TTL above max accepted")
	}
}

// brokenStore fails every revocation with a cause the caller must not see.
type brokenStore struct{ *tokenstore.Memory }

func (brokenStore) Revoke(context.Context, string, time.Time) (tokenstore.Record, error) {
	return tokenstore.Record{}, fmt.Errorf("disk on fire at /var/secret")
}

func TestInternalAnswerCarriesAReference(t *testing.T) {
	log := trustdtest.NewRecorder()

	svc, err := tokenapi.New(tokenapi.Config{Store: brokenStore{tokenstore.NewMemory(4)}, Logger: log.Logger()})
	if err != nil {
		t.Fatal(err)
	}

	_, err = svc.Revoke(context.Background(), &tokens.RevokeRequest{Id: "abcdef"})

	st := status.Convert(err)
	if st.Code() != codes.Internal || strings.Contains(st.Message(), "disk") || !strings.HasPrefix(st.Message(), "tokenapi: internal error (ref ") {
		t.Fatalf("answer = %v, want Internal with a reference only", err)
	}

	ref := strings.TrimSuffix(strings.TrimPrefix(st.Message(), "tokenapi: internal error (ref "), ")")

	var found int

	for _, r := range log.Records() {
		if r.String(logkey.RequestID) == ref && strings.Contains(r.String(logkey.Error), "disk on fire") {
			found++
		}
	}

	if found != 1 {
		t.Fatalf("%d log lines with the reference %q and the cause, want 1: %v", found, ref, log.Records())
	}
}
