package tokenstore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/golden"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		New: func(_ *testing.T, maxRecords int) tokenstore.Store { return tokenstore.NewMemory(maxRecords) },
	})
}

func TestUsable(t *testing.T) {
	base := storetest.NewRecord(t, "aaaaaa", 0, 2)
	at := testutil.Epoch.Add(time.Hour)

	revoked := base.Clone()
	revoked.Revoked = at

	usedUp := base.Clone()
	usedUp.Uses = 2

	tests := []struct {
		name string
		r    tokenstore.Record
		now  time.Time
		want error
	}{
		{name: "fresh", r: base, now: at},
		{name: "at expiry", r: base, now: base.Expires, want: tokenstore.ErrExpired},
		{name: "revoked", r: revoked, now: at, want: tokenstore.ErrRevoked},
		{name: "used up", r: usedUp, now: at, want: tokenstore.ErrUsedUp},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.r.Usable(tt.now); !errors.Is(err, tt.want) {
				t.Fatalf("Usable = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestRecordGolden pins the stored format: a change to it must be deliberate
// (a new encoding version), since stores written by older trustd are read
// back by newer ones.
func TestRecordGolden(t *testing.T) {
	r := storetest.NewRecord(t, "golden", 0, 1)
	r.Uses = 1
	r.Revoked = testutil.Epoch.Add(time.Hour)

	data, err := tokenstore.MarshalRecord(r)
	if err != nil {
		t.Fatal(err)
	}

	golden.Compare(t, "record.golden.json", data)

	back, err := tokenstore.UnmarshalRecord(data)
	if err != nil {
		t.Fatal(err)
	}

	if err := storetest.Same(back, r); err != nil {
		t.Fatal(err)
	}
}

func TestUnmarshalRefusals(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{name: "not JSON", data: "{"},
		{name: "unknown version", data: `{"v":2,"id":"aaaaaa"}`},
		{name: "invalid record", data: `{"v":1,"id":"aaaaaa"}`},
		{name: "too large", data: `{"v":1,"description":"` + string(bytes.Repeat([]byte("a"), tokenstore.MaxRecordSize)) + `"}`},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tokenstore.UnmarshalRecord([]byte(tt.data)); !errors.Is(err, tokenstore.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestMatchesSecret(t *testing.T) {
	r := storetest.NewRecord(t, "aaaaaa", 0, 0)

	for _, tt := range []struct {
		secret string
		want   bool
	}{
		{"0123456789abcdef", true},
		{"0123456789abcdee", false},
		{"", false},
		{"0123456789abcdef0", false},
	} {
		if got := r.MatchesSecret(tt.secret); got != tt.want {
			t.Errorf("MatchesSecret(%q) = %v, want %v", tt.secret, got, tt.want)
		}
	}
}

// FuzzUnmarshalRecord feeds arbitrary stored bytes: a corrupt or tampered
// store file must give ErrInvalid, never a record that breaks Validate.
func FuzzUnmarshalRecord(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "record.golden.json"))
	if err != nil {
		f.Fatal(err)
	}

	f.Add(golden)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`null`))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := tokenstore.UnmarshalRecord(data)
		if err != nil {
			if !errors.Is(err, tokenstore.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}

			return
		}

		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid record: %v", err)
		}

		again, err := tokenstore.MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}

		if _, err := tokenstore.UnmarshalRecord(again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}
