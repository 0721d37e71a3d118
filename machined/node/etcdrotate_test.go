package node

import (
	"crypto/x509"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestNeedsTrustRestart(t *testing.T) {
	a, b := catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)
	bundle := func(cas ...*ca.CA) []byte {
		out := []byte{}
		for _, c := range cas {
			out = append(out, c.CertPEM...)
		}

		return out
	}

	for name, tc := range map[string]struct {
		loaded []byte
		want   []*x509.Certificate
		out    bool
	}{
		"not running":              {nil, []*x509.Certificate{a.Cert, b.Cert}, false},
		"same":                     {bundle(a), []*x509.Certificate{a.Cert}, false},
		"same set, another order":  {bundle(b, a), []*x509.Certificate{a.Cert, b.Cert}, false},
		"accept a new one":         {bundle(a), []*x509.Certificate{a.Cert, b.Cert}, true},
		"drop the old one":         {bundle(a, b), []*x509.Certificate{b.Cert}, true},
		"another one entirely":     {bundle(a), []*x509.Certificate{b.Cert}, true},
		"loaded a file that broke": {[]byte("junk"), []*x509.Certificate{a.Cert}, true},
	} {
		if got := needsTrustRestart(tc.loaded, tc.want); got != tc.out {
			t.Errorf("%s: needsTrustRestart = %v, want %v", name, got, tc.out)
		}
	}
}
