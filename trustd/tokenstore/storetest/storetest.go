// Package storetest checks a tokenstore.Store implementation against the
// contract every backend must keep, so that the bbolt store, the in-memory
// store and a later shared store behave alike.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Factory makes stores for the suite.
type Factory struct {
	// New returns an empty store holding at most maxRecords records.
	New func(t *testing.T, maxRecords int) tokenstore.Store
	// Reopen closes s and opens the same storage again. Nil for stores
	// that do not persist; the persistence tests are then skipped.
	Reopen func(t *testing.T, s tokenstore.Store) tokenstore.Store
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"CreateGet", testCreateGet},
		{"CreateRefusals", testCreateRefusals},
		{"List", testList},
		{"Use", testUse},
		{"Revoke", testRevoke},
		{"Prune", testPrune},
		{"ConcurrentSingleUse", testConcurrentSingleUse},
		{"Reopen", testReopen},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, f) })
	}
}

// NewRecord returns a valid record with id, created at testutil.Epoch plus offset,
// expiring a day later, whose secret is "0123456789abcdef".
func NewRecord(t testing.TB, id string, offset time.Duration, maxUses uint32) tokenstore.Record {
	t.Helper()

	r := tokenstore.Record{
		ID:          id,
		Created:     testutil.Epoch.Add(offset),
		Expires:     testutil.Epoch.Add(offset + 24*time.Hour),
		MaxUses:     maxUses,
		AllowedSANs: []string{"node-*.example", "10.5.0.0/24"},
		Description: "record " + id,
	}

	if err := r.SetSecret(fixedReader{}, "0123456789abcdef"); err != nil {
		t.Fatal(err)
	}

	return r
}

type fixedReader struct{}

func (fixedReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}

	return len(p), nil
}

func mustCreate(t *testing.T, s tokenstore.Store, r tokenstore.Record) {
	t.Helper()

	if err := s.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%s): %v", r.ID, err)
	}
}

func testCreateGet(t *testing.T, f Factory) {
	s := f.New(t, 0)
	want := NewRecord(t, "aaaaaa", 0, 3)
	mustCreate(t, s, want)

	got, err := s.Get(context.Background(), "aaaaaa")
	if err != nil {
		t.Fatal(err)
	}

	if err := Same(got, want); err != nil {
		t.Fatal(err)
	}

	if !got.MatchesSecret("0123456789abcdef") || got.MatchesSecret("0123456789abcdee") {
		t.Fatal("stored secret hash does not verify the secret")
	}

	if _, err := s.Get(context.Background(), "zzzzzz"); !errors.Is(err, tokenstore.ErrNotFound) {
		t.Fatalf("Get(unknown) err = %v, want ErrNotFound", err)
	}

	// The store must not share slices with its caller.
	got.AllowedSANs[0] = "changed"
	if again, _ := s.Get(context.Background(), "aaaaaa"); again.AllowedSANs[0] != want.AllowedSANs[0] {
		t.Fatal("a caller's change reached the stored record")
	}
}

func testCreateRefusals(t *testing.T, f Factory) {
	s := f.New(t, 2)
	mustCreate(t, s, NewRecord(t, "aaaaaa", 0, 0))

	noExpiry := NewRecord(t, "cccccc", 0, 0)
	noExpiry.Expires = time.Time{}

	badID := NewRecord(t, "cccccc", 0, 0)
	badID.ID = "CCCCCC"

	tests := []struct {
		name string
		r    tokenstore.Record
		want error
	}{
		{name: "duplicate id", r: NewRecord(t, "aaaaaa", time.Hour, 0), want: tokenstore.ErrExists},
		{name: "no expiry", r: noExpiry, want: tokenstore.ErrInvalid},
		{name: "bad id", r: badID, want: tokenstore.ErrInvalid},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Create(context.Background(), tt.r); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}

	mustCreate(t, s, NewRecord(t, "bbbbbb", 0, 0))

	if err := s.Create(context.Background(), NewRecord(t, "dddddd", 0, 0)); !errors.Is(err, tokenstore.ErrFull) {
		t.Fatalf("third record in a store of two: err = %v, want ErrFull", err)
	}
}

func testList(t *testing.T, f Factory) {
	s := f.New(t, 0)

	for _, r := range []tokenstore.Record{
		NewRecord(t, "cccccc", time.Minute, 0),
		NewRecord(t, "bbbbbb", 0, 0),
		NewRecord(t, "aaaaaa", 0, 0),
	} {
		mustCreate(t, s, r)
	}

	rs, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	if got := ids(rs); !slices.Equal(got, []string{"aaaaaa", "bbbbbb", "cccccc"}) {
		t.Fatalf("List order = %v", got)
	}
}

func testUse(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f.New(t, 0)
	mustCreate(t, s, NewRecord(t, "twice0", 0, 2))
	mustCreate(t, s, NewRecord(t, "nolimt", 0, 0))

	for i := range 2 {
		r, err := s.Use(ctx, "twice0", testutil.Epoch.Add(time.Hour))
		if err != nil || r.Uses != uint32(i+1) {
			t.Fatalf("use %d: uses=%d err=%v", i+1, r.Uses, err)
		}
	}

	tests := []struct {
		name string
		id   string
		now  time.Time
		want error
	}{
		{name: "used up", id: "twice0", now: testutil.Epoch.Add(time.Hour), want: tokenstore.ErrUsedUp},
		{name: "expired", id: "nolimt", now: testutil.Epoch.Add(24 * time.Hour), want: tokenstore.ErrExpired},
		{name: "unknown", id: "zzzzzz", now: testutil.Epoch, want: tokenstore.ErrNotFound},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Use(ctx, tt.id, tt.now); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}

	if r, _ := s.Get(ctx, "twice0"); r.Uses != 2 {
		t.Fatalf("a refused use was counted: uses = %d", r.Uses)
	}

	if r, err := s.Use(ctx, "nolimt", testutil.Epoch.Add(time.Hour)); err != nil || r.Uses != 1 {
		t.Fatalf("unlimited token: uses=%d err=%v", r.Uses, err)
	}
}

func testRevoke(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f.New(t, 0)
	mustCreate(t, s, NewRecord(t, "aaaaaa", 0, 0))

	first := testutil.Epoch.Add(time.Minute)

	r, err := s.Revoke(ctx, "aaaaaa", first)
	if err != nil || !r.Revoked.Equal(first) {
		t.Fatalf("Revoke: revoked=%v err=%v", r.Revoked, err)
	}

	if r, err = s.Revoke(ctx, "aaaaaa", first.Add(time.Hour)); err != nil || !r.Revoked.Equal(first) {
		t.Fatalf("second Revoke: revoked=%v err=%v, want the first time kept", r.Revoked, err)
	}

	if _, err = s.Use(ctx, "aaaaaa", first); !errors.Is(err, tokenstore.ErrRevoked) {
		t.Fatalf("Use of revoked: err = %v", err)
	}

	if _, err = s.Revoke(ctx, "zzzzzz", first); !errors.Is(err, tokenstore.ErrNotFound) {
		t.Fatalf("Revoke(unknown) err = %v", err)
	}

	if rs, _ := s.List(ctx); len(rs) != 1 || rs[0].Revoked.IsZero() {
		t.Fatal("revoked token is not listed as revoked")
	}
}

func testPrune(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f.New(t, 0)
	mustCreate(t, s, NewRecord(t, "expird", -48*time.Hour, 0)) // expired at testutil.Epoch-24h
	mustCreate(t, s, NewRecord(t, "revokd", 0, 0))
	mustCreate(t, s, NewRecord(t, "lively", 0, 0))

	if _, err := s.Revoke(ctx, "revokd", testutil.Epoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	n, err := s.Prune(ctx, testutil.Epoch.Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}

	if rs, _ := s.List(ctx); !slices.Equal(ids(rs), []string{"lively"}) {
		t.Fatalf("after Prune: %v", ids(rs))
	}
}

// testConcurrentSingleUse is the atomicity contract: 100 concurrent uses of
// a single-use token, exactly one succeeds.
func testConcurrentSingleUse(t *testing.T, f Factory) {
	const n = 100

	s := f.New(t, 0)
	mustCreate(t, s, NewRecord(t, "single", 0, 1))

	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		ok, usedUp   int
		otherRefusal error
	)

	for range n {
		wg.Go(func() {
			_, err := s.Use(context.Background(), "single", testutil.Epoch.Add(time.Minute))

			mu.Lock()
			defer mu.Unlock()

			switch {
			case err == nil:
				ok++
			case errors.Is(err, tokenstore.ErrUsedUp):
				usedUp++
			default:
				otherRefusal = err
			}
		})
	}

	wg.Wait()

	if ok != 1 || usedUp != n-1 {
		t.Fatalf("successes = %d, ErrUsedUp = %d, other = %v; want 1 and %d", ok, usedUp, otherRefusal, n-1)
	}
}

func testReopen(t *testing.T, f Factory) {
	if f.Reopen == nil {
		t.Skip("store does not persist")
	}

	ctx := context.Background()
	s := f.New(t, 0)
	mustCreate(t, s, NewRecord(t, "aaaaaa", 0, 3))
	mustCreate(t, s, NewRecord(t, "bbbbbb", 0, 0))

	if _, err := s.Use(ctx, "aaaaaa", testutil.Epoch); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Revoke(ctx, "bbbbbb", testutil.Epoch); err != nil {
		t.Fatal(err)
	}

	before, _ := s.List(ctx)
	s = f.Reopen(t, s)

	after, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if len(after) != len(before) {
		t.Fatalf("reopened store lists %d records, want %d", len(after), len(before))
	}

	for i := range before {
		if err := Same(after[i], before[i]); err != nil {
			t.Fatalf("after reopen: %v", err)
		}
	}

	if r, err := s.Use(ctx, "aaaaaa", testutil.Epoch); err != nil || r.Uses != 2 {
		t.Fatalf("use after reopen: uses=%d err=%v, want 2", r.Uses, err)
	}
}

// Same reports how got differs from want, comparing times as instants.
func Same(got, want tokenstore.Record) error {
	switch {
	case got.ID != want.ID:
		return fmt.Errorf("id %q, want %q", got.ID, want.ID)
	case !slices.Equal(got.Salt, want.Salt) || !slices.Equal(got.SecretHash, want.SecretHash):
		return fmt.Errorf("%s: salt or secret hash differs", want.ID)
	case !got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) || !got.Revoked.Equal(want.Revoked):
		return fmt.Errorf("%s: times %v/%v/%v, want %v/%v/%v", want.ID, got.Created, got.Expires, got.Revoked, want.Created, want.Expires, want.Revoked)
	case got.MaxUses != want.MaxUses || got.Uses != want.Uses:
		return fmt.Errorf("%s: uses %d/%d, want %d/%d", want.ID, got.Uses, got.MaxUses, want.Uses, want.MaxUses)
	case !slices.Equal(got.AllowedSANs, want.AllowedSANs) || got.Description != want.Description:
		return fmt.Errorf("%s: SANs %q desc %q, want %q %q", want.ID, got.AllowedSANs, got.Description, want.AllowedSANs, want.Description)
	}

	return nil
}

func ids(rs []tokenstore.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}

	return out
}
