package upgrade

import (
	"path/filepath"
	"testing"
	"time"
)

// TestStoreKeepsTheRollback: the last rollback is read back whole, and a
// state file that holds only its reason (as files did before its time
// and versions were recorded) still loads.
func TestStoreKeepsTheRollback(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	want := Rollback{At: at, From: "v0.3.0", To: "v0.2.0", Reason: "v0.3.0 was not healthy within 1m0s", ByNode: true}

	if err := st.Save(State{Active: installed, LastRollback: &want}); err != nil {
		t.Fatal(err)
	}

	got, ok, err := st.Load()
	if !ok || err != nil || got.LastRollback == nil || *got.LastRollback != want {
		t.Fatalf("loaded %+v (%v, %v), want the rollback %+v", got.LastRollback, ok, err, want)
	}

	for name, tc := range map[string]struct {
		file string
		want Rollback
	}{
		"reason only": {`{"active":{"name":"installed","bin_dir":"/usr/bin","version":"v0.2.0"},"last_rollback":"asked"}`, Rollback{Reason: "asked"}},
		// A later version's fields are ignored: this version is the one
		// its rollback runs.
		"a later version's fields": {`{"active":{"name":"installed","bin_dir":"/usr/bin","version":"v0.2.0"},"future":1,"last_rollback":{"reason":"x","who":"y"}}`, Rollback{Reason: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := writeFile(filepath.Join(st.Dir, "state.json"), tc.file); err != nil {
				t.Fatal(err)
			}

			s, _, err := st.Load()
			if err != nil || s.LastRollback == nil || *s.LastRollback != tc.want {
				t.Fatalf("Load: %+v, %v; want the rollback %+v", s.LastRollback, err, tc.want)
			}
		})
	}
}
