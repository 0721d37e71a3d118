package archtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each check is run against a fixture with known violations, so that none
// of them is a check that cannot fail.

func fixtureRules(t *testing.T, dir string) *Rules {
	t.Helper()

	text, err := os.ReadFile(filepath.Join("testdata", dir, "doc.md"))
	if err != nil {
		t.Fatal(err)
	}

	r, err := ParseDoc(string(text))
	if err != nil {
		t.Fatal(err)
	}

	return r
}

func fixtureSource(t *testing.T, dir string) *source {
	t.Helper()

	src, err := parseModule(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}

	return src
}

// expect fails unless found holds exactly one violation containing each of
// want's entries (all of its words) and nothing else.
func expect(t *testing.T, found []Violation, want ...[]string) {
	t.Helper()

	var got []string
	for _, v := range found {
		got = append(got, v.String())
	}

	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool {
			for _, part := range w {
				if !strings.Contains(g, part) {
					return false
				}
			}

			return true
		})
		if i < 0 {
			t.Errorf("no violation with %q among:\n%s", w, strings.Join(got, "\n"))

			continue
		}

		got = slices.Delete(got, i, i+1)
	}

	for _, g := range got {
		t.Errorf("unexpected violation: %s", g)
	}
}

func TestImportsFixture(t *testing.T) {
	r := fixtureRules(t, "imports")

	pkgs, err := ListPackages(filepath.Join("testdata", "imports"))
	if err != nil {
		t.Fatal(err)
	}

	expect(t, r.CheckImports(pkgs),
		[]string{"low/b: imports comp/x:", "up a layer"},
		[]string{"low/b: imports low/a:", "none of low/a", "narrower rule"},
		[]string{"comp/x: imports comp/y:", "across components", "comp/x → comp/y"},
		[]string{"client/join: imports comp/x:", "the client layer may import leaves", "comp/x is in components"},
		[]string{"stray: belongs to no layer", "new row"},
		[]string{"docs/architecture.md:", "the named exception names comp/gone, which is no package"},
		[]string{"docs/architecture.md:", "the narrower rule names old/join, which is no package"},
	)
}

func TestStatusFixture(t *testing.T) {
	r := fixtureRules(t, "status")

	expect(t, fixtureSource(t, "status").checkStatus(r.StatusFuncs),
		[]string{"srv/handler.go:12:", "status.Errorf in Handle"},
		[]string{"srv/handler.go:18:", "codes.OK returned or assigned in code"},
		[]string{"srv/handler.go:21:", "codes.NotFound returned or assigned in code"})
}

func TestLogKeysFixture(t *testing.T) {
	expect(t, fixtureSource(t, "logkeys").checkLogKeys(),
		[]string{"svc/svc.go:15:", `"peer" is a string literal`},
		[]string{"svc/svc.go:16:", `"peer" is a string literal`},
		[]string{"svc/svc.go:17:", "localKey is a constant of svc"},
		[]string{"svc/svc.go:18:", `"peer" is a string literal`},
	)
}

func TestDefaultsFixture(t *testing.T) {
	expect(t, fixtureSource(t, "defaults").checkDefaults(),
		[]string{"svc/svc.go:15:", "cfg.Logger", "defaults.Logger"},
		[]string{"svc/svc.go:29:", "s.log", "defaults.Logger"},
		[]string{"svc/svc.go:33:", "of w ", "defaults.Output"},
		[]string{"svc/svc.go:39:", "of l ", "defaults.Logger"})
}

func TestParseDocRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"no import table":        "| server | function | internal answer |\n| - | - | - |\n| s | `a.go` `f` | x |\n",
		"two layers of one name": "| layer | packages | may import |\n| - | - | - |\n| leaves | `a` | leaves |\n| leaves | `b` | leaves |\n",
		"unknown may import":     "| layer | packages | may import |\n| - | - | - |\n| leaves | `a` | sideways |\n",
		"function without file": "| layer | packages | may import |\n| - | - | - |\n| leaves | `a` | leaves |\n\n" +
			"| server | function | internal answer |\n| - | - | - |\n| s | `f` | x |\n",
		"file without function": "| layer | packages | may import |\n| - | - | - |\n| leaves | `a` | leaves |\n\n" +
			"| server | function | internal answer |\n| - | - | - |\n| s | `a.go` | x |\n",
		"exception without arrow": "| layer | packages | may import |\n| - | - | - |\n| leaves | `a` | leaves |\n\n" +
			"| server | function | internal answer |\n| - | - | - |\n| s | `a.go` `f` | x |\n\n### Named exceptions\n\n- `a` to `b`: why\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseDoc(doc); err == nil {
				t.Fatal("parsed")
			}
		})
	}
}
