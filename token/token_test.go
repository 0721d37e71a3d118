package token

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{name: "valid", in: "abcdef.0123456789abcdef", ok: true},
		{name: "all digits", in: "012345.0123456789012345", ok: true},
		{name: "empty", in: ""},
		{name: "no dot", in: "abcdef0123456789abcdef0"},
		{name: "dot misplaced", in: "abcde.f0123456789abcdef"},
		{name: "uppercase", in: "ABCDEF.0123456789abcdef"},
		{name: "short secret", in: "abcdef.0123456789abcde"},
		{name: "long secret", in: "abcdef.0123456789abcdef0"},
		{name: "symbol", in: "abc-ef.0123456789abcdef"},
		{name: "non-ascii", in: "abcdé.0123456789abcdef"},
		{name: "trailing newline", in: "abcdef.0123456789abcde\n"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := Parse(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}

				if tok.Reveal() != tt.in {
					t.Fatalf("Reveal() = %q, want %q", tok.Reveal(), tt.in)
				}

				return
			}

			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) err = %v, want ErrMalformed", tt.in, err)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{in: "abcdef", ok: true},
		{in: "0a1b2c", ok: true},
		{in: ""},
		{in: "abcde"},
		{in: "abcdefg"},
		{in: "ABCDEF"},
		{in: "abc.ef"},
	}

	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ValidID(tt.in); got != tt.ok {
				t.Fatalf("ValidID(%q) = %v, want %v", tt.in, got, tt.ok)
			}
		})
	}
}

func TestStringNeverShowsSecret(t *testing.T) {
	tok, err := Parse("abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range []string{tok.String(), fmt.Sprint(tok), fmt.Sprintf("%v %s %+v", tok, tok, tok)} {
		if strings.Contains(s, tok.Secret()) {
			t.Fatalf("%q leaks the secret", s)
		}

		if !strings.Contains(s, "abcdef") {
			t.Fatalf("%q does not show the id", s)
		}
	}
}

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}

	for range 200 {
		tok, err := Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}

		if _, err := Parse(tok.Reveal()); err != nil {
			t.Fatalf("generated token %s does not parse: %v", tok, err)
		}

		if seen[tok.Reveal()] {
			t.Fatal("duplicate token generated")
		}

		seen[tok.Reveal()] = true
	}
}

func TestGenerateSkipsBiasedBytes(t *testing.T) {
	// 252..255 are above the largest multiple of 36 and must be discarded.
	src := append(bytes.Repeat([]byte{255}, 44), bytes.Repeat([]byte{1}, 44)...)

	tok, err := Generate(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}

	if tok.Reveal() != "111111.1111111111111111" {
		t.Fatalf("token = %q", tok.Reveal())
	}
}

func TestGenerateShortRead(t *testing.T) {
	if _, err := Generate(bytes.NewReader([]byte{1, 2, 3})); err == nil {
		t.Fatal("Generate from an exhausted reader succeeded")
	}
}

func TestEqual(t *testing.T) {
	a, _ := Parse("abcdef.0123456789abcdef")
	b, _ := Parse("abcdef.0123456789abcdef")
	c, _ := Parse("abcdef.0123456789abcdee")

	if !a.Equal(b) || a.Equal(c) || a.Equal(Token{}) {
		t.Fatal("Equal gives wrong answers")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"abcdef.0123456789abcdef", "", ".", "abcdef.", "ABCDEF.0123456789ABCDEF"} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			return
		}

		if tok.Reveal() != s {
			t.Fatalf("accepted %q but reveals %q", s, tok.Reveal())
		}

		if strings.Contains(tok.String(), tok.Secret()) {
			t.Fatalf("String leaks the secret of %q", s)
		}
	})
}
