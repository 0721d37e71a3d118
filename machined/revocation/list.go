package revocation

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// ListConfig configures a List.
type ListConfig struct {
	// Path is the file the list is kept in, in the node's state directory.
	// Empty keeps it in memory only (tests).
	Path string
	// Max bounds the entries; zero means MaxEntries.
	Max int
	// Clock decides which entries have expired. Nil means the system clock.
	Clock clock.Clock
}

// List is a node's copy of the revocation list: the last one it learned,
// kept in its state directory so that a restart, or a worker that cannot
// reach any control plane, keeps enforcing it. It is safe for concurrent
// use.
type List struct {
	cfg ListConfig

	mu       sync.Mutex
	entries  []Entry // sorted by serial, none expired at the last change
	revision int64   // the etcd revision entries were read at; 0 unknown
	changed  chan struct{}
}

// listFile is the persisted form.
type listFile struct {
	Entries []Entry `json:"entries"`
}

// OpenList loads the list kept at cfg.Path, if there is one. A file that
// does not parse is an error naming it: the node must not start out
// enforcing an empty list by accident.
func OpenList(cfg ListConfig) (*List, error) {
	if cfg.Max <= 0 {
		cfg.Max = MaxEntries
	}

	cfg.Clock = defaults.Clock(cfg.Clock)

	l := &List{cfg: cfg, changed: make(chan struct{})}
	if cfg.Path == "" {
		return l, nil
	}

	entries, err := readFile(cfg.Path)
	if err != nil {
		return nil, err
	}

	l.entries = l.bound(entries)

	return l, nil
}

func readFile(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}

	if err != nil {
		return nil, fmt.Errorf("revocation: %w", err)
	}
	defer f.Close()

	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("revocation: %s: %w", path, err)
	}

	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("revocation: %s: larger than %d bytes", path, MaxFileSize)
	}

	var lf listFile
	if err := json.Unmarshal(data, &lf); err != nil {
		return nil, fmt.Errorf("revocation: %s: %w", path, err)
	}

	for i, e := range lf.Entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("revocation: %s: entry %d: %w", path, i, err)
		}
	}

	return lf.Entries, nil
}

// Replace makes entries the list: expired entries are dropped, duplicates
// merged, and at most Max kept (those that expire last: a list over the
// bound comes from a misbehaving source, and the entries of longer-lived
// certificates are the ones that matter longest). The file is rewritten
// when the list changed; a failed write leaves the list as it was, so what
// is enforced is what a restart finds. The revision stays as it was. It
// reports whether the list changed.
func (l *List) Replace(entries []Entry) (bool, error) {
	return l.replace(entries, func(cur int64) int64 { return cur })
}

// ReplaceAt is Replace of entries read at an etcd revision, which the list
// then holds (Revision); a change of the revision alone counts as a change,
// without rewriting the file (the revision is not kept across restarts: a
// restarted node starts from zero, and gets the whole list once).
func (l *List) ReplaceAt(entries []Entry, revision int64) (bool, error) {
	return l.replace(entries, func(int64) int64 { return revision })
}

func (l *List) replace(entries []Entry, revision func(int64) int64) (bool, error) {
	next := l.bound(entries)

	l.mu.Lock()
	defer l.mu.Unlock()

	rev := revision(l.revision)
	same := slices.EqualFunc(next, l.entries, sameEntry)

	if same && rev == l.revision {
		return false, nil
	}

	if !same {
		if err := l.save(next); err != nil {
			return false, err
		}
	}

	l.entries, l.revision = next, rev
	close(l.changed)
	l.changed = make(chan struct{})

	return !same, nil
}

// Revision is the etcd revision of the list, zero when not known: a node
// before its first read of etcd or of a control plane's Watch.
func (l *List) Revision() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.revision
}

// Prune drops the entries whose certificates have expired.
func (l *List) Prune() (bool, error) { return l.Replace(l.Entries()) }

// Entries returns the list, sorted by serial.
func (l *List) Entries() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()

	return slices.Clone(l.entries)
}

// Changed returns a channel closed at the list's next change; take it
// before reading Entries.
func (l *List) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.changed
}

// bound is entries sorted by serial, without expired entries or
// duplicates (the entry that expires last wins), at most Max of them.
func (l *List) bound(entries []Entry) []Entry {
	now := l.cfg.Clock.Now()
	bySerial := map[string]Entry{}

	for _, e := range entries {
		if e.Expired(now) {
			continue
		}

		if old, ok := bySerial[e.Serial]; !ok || e.NotAfter.After(old.NotAfter) {
			bySerial[e.Serial] = e
		}
	}

	out := make([]Entry, 0, len(bySerial))
	for _, e := range bySerial {
		out = append(out, e)
	}

	if len(out) > l.cfg.Max {
		slices.SortFunc(out, func(a, b Entry) int { return b.NotAfter.Compare(a.NotAfter) })
		out = out[:l.cfg.Max]
	}

	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Serial, b.Serial) })

	return out
}

func (l *List) save(entries []Entry) error {
	if l.cfg.Path == "" {
		return nil
	}

	data, err := json.Marshal(listFile{Entries: entries})
	if err != nil {
		return fmt.Errorf("revocation: %w", err)
	}

	if err := atomicfile.Write(l.cfg.Path, data, 0o600, atomicfile.Options{Overwrite: true}); err != nil {
		return fmt.Errorf("revocation: keeping the list: %w", err)
	}

	return nil
}

func sameEntry(a, b Entry) bool {
	return a.Serial == b.Serial && a.NotAfter.Equal(b.NotAfter) && a.RevokedAt.Equal(b.RevokedAt) &&
		a.RevokedBy == b.RevokedBy && a.Reason == b.Reason
}

// Serials is the set of the list's serials at the time of the call, with
// their expiries, for the services that enforce it.
func Serials(entries []Entry) map[string]time.Time {
	out := make(map[string]time.Time, len(entries))
	for _, e := range entries {
		out[e.Serial] = e.NotAfter
	}

	return out
}
