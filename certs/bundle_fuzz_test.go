package certs_test

import (
	"errors"
	"testing"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

// FuzzParseBundle covers secrets bundles, which operators bring from
// elsewhere (Talos's included): any input is refused with a validation
// error listing its problems, or yields a bundle that survives its own
// round trip.
func FuzzParseBundle(f *testing.F) {
	f.Add([]byte(readGolden(f, goldenBundle)))
	f.Add([]byte("cluster: {id: x, secret: y}\ncerts: {os: {crt: AAAA}}\n"))
	f.Add([]byte("trustdinfo: {token: abcdef.0123456789abcdef}\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := certs.ParseBundle("fuzz", data, testutil.Epoch)
		if err != nil {
			var verr *certs.ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 {
				t.Fatalf("error is not a validation error with problems: %v", err)
			}

			return
		}

		if _, err = b.OSCA(testutil.Epoch); err != nil {
			t.Fatalf("accepted bundle has no usable OS CA: %v", err)
		}

		out, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		if _, err = certs.ParseBundle("again", out, testutil.Epoch); err != nil {
			t.Fatalf("re-encoded bundle refused: %v", err)
		}
	})
}
