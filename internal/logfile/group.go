package logfile

import (
	"fmt"
	"os"
	"sync"
)

// groupCommit runs the syncs of File.Commit. Each caller joins the round
// not yet started (next). A caller that finds no sync running starts that
// round: it syncs everything written so far, outside the lock, while later
// callers join the round after it. So one sync covers every caller that
// waited while the previous one ran, and none returns before a sync that
// began after its call.
type groupCommit struct {
	// sync makes a file's written data durable; tests replace it.
	sync func(*os.File) error
	// cond is signalled, on the File's mutex, when a round ends.
	cond sync.Cond
	// syncing is true while a round's sync runs.
	syncing bool
	// dirty is true when the file was written since the last sync began.
	dirty bool
	next  *round
	// syncs counts the rounds run, for tests.
	syncs uint64
}

// round is one sync and the callers it covers.
type round struct {
	waiting int
	done    bool
	err     error
}

func newGroupCommit(sync func(*os.File) error) *groupCommit {
	return &groupCommit{sync: sync, next: &round{}}
}

// waitLocked returns once a sync covering everything written so far has
// ended, with its error; l.mu is held, and released while waiting.
func (g *groupCommit) waitLocked(l *File) error {
	r := g.next
	r.waiting++

	for !r.done {
		if g.syncing {
			g.cond.Wait()

			continue
		}

		g.runLocked(l.f, r)
	}

	return r.err
}

// runLocked syncs f for round r, which must be next, with l.mu released
// during the sync so that further writes go on and join the round after.
func (g *groupCommit) runLocked(f *os.File, r *round) {
	g.syncing, g.next, g.dirty = true, &round{}, false

	g.cond.L.Unlock()
	err := g.sync(f)
	g.cond.L.Lock()

	g.finish(r, err)
	g.syncing = false
}

// settleLocked syncs f at once, the lock held, if it was written since the
// last sync began: before f is closed by a rotation or Close, as a writer
// that has not yet called Commit, or waits in the next round, wrote to f.
// No sync may be running.
func (g *groupCommit) settleLocked(f *os.File) {
	if !g.dirty && g.next.waiting == 0 {
		return
	}

	r := g.next
	g.next, g.dirty = &round{}, false
	g.finish(r, g.sync(f))
}

func (g *groupCommit) finish(r *round, err error) {
	if err != nil {
		err = fmt.Errorf("logfile: syncing: %w", err)
	}

	r.done, r.err = true, err
	g.syncs++
	g.cond.Broadcast()
}

// syncDir makes the entries of dir (a file created or renamed in it)
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("logfile: %w", err)
	}

	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}

	if err != nil {
		return fmt.Errorf("logfile: syncing %s: %w", dir, err)
	}

	return nil
}
