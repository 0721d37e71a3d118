package revocation_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/machined/revocation"
)

// FuzzParseSerial: whatever an operator types is refused or becomes a
// canonical serial that parses to itself.
func FuzzParseSerial(f *testing.F) {
	for _, s := range []string{"5F:3A:09", "0xab", "00ab", "", "0", "-1", "zz", strings.Repeat("f", 41)} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, in string) {
		s, err := revocation.ParseSerial(in)
		if err != nil {
			return
		}

		if again, err := revocation.ParseSerial(s); err != nil || again != s {
			t.Fatalf("ParseSerial(%q) = %q, which parses to %q, %v", in, s, again, err)
		}

		if len(s) > revocation.MaxSerialLength || strings.Trim(s, "0123456789abcdef") != "" || s[0] == '0' {
			t.Fatalf("ParseSerial(%q) = %q, not canonical", in, s)
		}
	})
}

// FuzzOpenList: a damaged list in the node's state is refused with an
// error, never a panic, and a list that opens holds only checked entries.
func FuzzOpenList(f *testing.F) {
	f.Add(`{"entries":[{"serial":"ab","not_after":"2099-01-01T00:00:00Z","reason":"lost"}]}`)
	f.Add(`{"entries":[{"serial":"AB","not_after":"2099-01-01T00:00:00Z"}]}`)
	f.Add(`{"entries":null}`)
	f.Add(`{`)

	f.Fuzz(func(t *testing.T, data string) {
		path := filepath.Join(t.TempDir(), "revocations.json")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}

		l, err := revocation.OpenList(revocation.ListConfig{Path: path})
		if err != nil {
			return
		}

		for _, e := range l.Entries() {
			if s, err := revocation.ParseSerial(e.Serial); err != nil || s != e.Serial || len(e.Reason) > revocation.MaxReason {
				t.Fatalf("entry %+v opened", e)
			}
		}
	})
}
