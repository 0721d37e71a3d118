package trustd

import (
	"sync"

	"github.com/aegis-os/aegis/api/revocations"
)

// RevocationSnapshot is the revocation list at one revision.
type RevocationSnapshot struct {
	// Revision is the etcd revision the list was read at; zero when the
	// control plane has not read etcd since it started.
	Revision int64
	// List holds serial and expiry of each entry. It is shared: never
	// modified.
	List []*revocations.Revocation
	// Changed is closed when a newer snapshot replaces this one.
	Changed <-chan struct{}
}

// RevocationFeed is the revocation list trustd serves, as machined hands
// it over: one copy per process, whatever the number of watching nodes.
// Its zero value is an empty list at revision zero; it is safe for
// concurrent use.
type RevocationFeed struct {
	mu      sync.Mutex
	current RevocationSnapshot
	changed chan struct{}
}

// Set makes list, read at revision, the current snapshot and wakes every
// watcher. The feed keeps list: the caller must not modify it afterwards.
func (f *RevocationFeed) Set(revision int64, list []*revocations.Revocation) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.initLocked()
	close(f.changed)

	f.changed = make(chan struct{})
	f.current = RevocationSnapshot{Revision: revision, List: list, Changed: f.changed}
}

// Snapshot implements RevocationSource.
func (f *RevocationFeed) Snapshot() RevocationSnapshot {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.initLocked()

	return f.current
}

func (f *RevocationFeed) initLocked() {
	if f.changed == nil {
		f.changed = make(chan struct{})
		f.current.Changed = f.changed
	}
}
