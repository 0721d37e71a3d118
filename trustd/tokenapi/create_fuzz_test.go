package tokenapi

import (
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// FuzzNewRecord covers a Create request as a caller sends it: any request
// is refused, or gives a record the store accepts, with canonical SAN
// patterns that parse back to themselves.
func FuzzNewRecord(f *testing.F) {
	f.Add(int64(3600), int32(0), uint32(1), "node-*.example", "10.5.0.0/24", "a token")
	f.Add(int64(0), int32(0), uint32(0), "", "", "")
	f.Add(int64(-1), int32(-5), uint32(3), "*", "fd00::/8", "x\x00y")
	f.Add(int64(1<<40), int32(999999999), uint32(0), "NODE-1.Example", "10.5.0.1/24", "é")

	svc, err := New(Config{Store: tokenstore.NewMemory(0)})
	if err != nil {
		f.Fatal(err)
	}

	now := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

	f.Fuzz(func(t *testing.T, secs int64, nanos int32, maxUses uint32, san1, san2, desc string) {
		req := &tokens.CreateRequest{
			Ttl: &durationpb.Duration{Seconds: secs, Nanos: nanos}, MaxUses: maxUses,
			AllowedSans: []string{san1, san2}, Description: desc,
		}

		rec, err := svc.newRecord(req, now)
		if err != nil {
			return
		}

		rec.ID = "abcdef"
		if err = rec.SetSecret(rand.Reader, "0123456789abcdef"); err != nil {
			t.Fatal(err)
		}

		if err = rec.Validate(); err != nil {
			t.Fatalf("accepted request gives a record the store refuses: %v", err)
		}

		p, err := sanpolicy.Parse(rec.AllowedSANs)
		if err != nil || !slices.Equal(p.Strings(), rec.AllowedSANs) {
			t.Fatalf("stored patterns %q are not canonical: %v", rec.AllowedSANs, err)
		}
	})
}
