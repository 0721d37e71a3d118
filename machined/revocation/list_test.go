package revocation_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/revocation"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func entry(serial string, life time.Duration) revocation.Entry {
	return revocation.Entry{Serial: serial, NotAfter: t0.Add(life), RevokedAt: t0, RevokedBy: "O=os:admin, CN=admin"}
}

func serials(entries []revocation.Entry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Serial)
	}

	return out
}

func TestListBounded(t *testing.T) {
	l, err := revocation.OpenList(revocation.ListConfig{Max: 3, Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}

	// Five entries for a list of three: those that expire last stay.
	var in []revocation.Entry
	for i := range 5 {
		in = append(in, entry(fmt.Sprintf("a%d", i), time.Duration(i+1)*time.Hour))
	}

	if _, err := l.Replace(in); err != nil {
		t.Fatal(err)
	}

	if got := fmt.Sprint(serials(l.Entries())); got != "[a2 a3 a4]" {
		t.Fatalf("entries %s, want the three that expire last, [a2 a3 a4]", got)
	}
}

func TestListPrunesExpired(t *testing.T) {
	clk := clock.NewFake(t0)

	l, err := revocation.OpenList(revocation.ListConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := l.Replace([]revocation.Entry{entry("1", time.Hour), entry("2", 2*time.Hour), entry("3", -time.Second)}); err != nil {
		t.Fatal(err)
	}

	if got := fmt.Sprint(serials(l.Entries())); got != "[1 2]" {
		t.Fatalf("entries %s, want the expired one left out, [1 2]", got)
	}

	changed := l.Changed()

	// Valid through NotAfter: not pruned at that instant.
	clk.Advance(time.Hour)

	if ok, err := l.Prune(); err != nil || ok {
		t.Fatalf("Prune at the NotAfter of 1: changed %v, %v; want no change", ok, err)
	}

	clk.Advance(time.Nanosecond)

	if ok, err := l.Prune(); err != nil || !ok {
		t.Fatalf("Prune past the NotAfter of 1: changed %v, %v; want a change", ok, err)
	}

	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by the prune")
	}

	if got := fmt.Sprint(serials(l.Entries())); got != "[2]" {
		t.Fatalf("entries %s after the prune, want [2]", got)
	}
}

func TestListPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.json")
	clk := clock.NewFake(t0)

	l, err := revocation.OpenList(revocation.ListConfig{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	want := []revocation.Entry{entry("ab", time.Hour), entry("cd", 2*time.Hour)}
	if _, err := l.Replace(want); err != nil {
		t.Fatal(err)
	}

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}

	// A restart: the same file, opened again.
	again, err := revocation.OpenList(revocation.ListConfig{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	got := again.Entries()
	if len(got) != 2 || got[0].Serial != "ab" || got[1].RevokedBy != want[1].RevokedBy || !got[1].NotAfter.Equal(want[1].NotAfter) {
		t.Fatalf("reopened list %+v, want %+v", got, want)
	}

	// Opened after the first entry expired: it is not enforced again.
	clk.Advance(90 * time.Minute)

	later, err := revocation.OpenList(revocation.ListConfig{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	if got := fmt.Sprint(serials(later.Entries())); got != "[cd]" {
		t.Fatalf("reopened after an expiry: %s, want [cd]", got)
	}
}

func TestListRefusesDamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.json")

	for name, data := range map[string]string{
		"not json":   "{",
		"bad serial": `{"entries":[{"serial":"xyz","not_after":"2030-01-01T00:00:00Z"}]}`,
		"no expiry":  `{"entries":[{"serial":"ab"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}

			_, err := revocation.OpenList(revocation.ListConfig{Path: path})
			if err == nil {
				t.Fatal("a damaged list opened; the node would enforce nothing")
			}

			if !errors.Is(err, revocation.ErrBadEntry) && name != "not json" {
				t.Errorf("error %v, want ErrBadEntry", err)
			}
		})
	}
}

func TestParseSerial(t *testing.T) {
	for in, want := range map[string]string{
		"5F3A09C2": "5f3a09c2",
		"0x5f3a":   "5f3a",
		"5F:3A:09": "5f3a09",
		"00ab":     "ab",
		" ab ":     "ab",
		"":         "",
		"0":        "",
		"xyz":      "",
		"-1":       "",
		"0123456789abcdef0123456789abcdef012345678": "",
	} {
		got, err := revocation.ParseSerial(in)
		if want == "" {
			if err == nil {
				t.Errorf("ParseSerial(%q) = %q, want an error", in, got)
			}

			continue
		}

		if err != nil || got != want {
			t.Errorf("ParseSerial(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestListRevision: ReplaceAt keeps the revision, and a new revision of
// the same entries is a change of the list (its watchers wake) but not of
// the entries; Replace leaves the revision as it was.
func TestListRevision(t *testing.T) {
	l, err := revocation.OpenList(revocation.ListConfig{Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}

	entries := []revocation.Entry{entry("ab", time.Hour)}

	if changed, err := l.ReplaceAt(entries, 7); err != nil || !changed || l.Revision() != 7 {
		t.Fatalf("first list: changed %v, %v, revision %d; want true, nil, 7", changed, err, l.Revision())
	}

	woken := l.Changed()

	if changed, err := l.ReplaceAt(entries, 8); err != nil || changed || l.Revision() != 8 {
		t.Fatalf("same entries at 8: changed %v, %v, revision %d; want false, nil, 8", changed, err, l.Revision())
	}

	select {
	case <-woken:
	default:
		t.Fatal("a new revision did not wake the list's watchers")
	}

	if _, err := l.Replace(nil); err != nil || l.Revision() != 8 {
		t.Fatalf("Replace: %v, revision %d; want nil, 8", err, l.Revision())
	}
}
