package timesync

import "sync"

// Gate is an open-or-closed flag that tells watchers when it changes. The
// time service drives one; consumers such as trustd read it through
// Synced and Changed. Its zero value is a closed gate ready to use.
type Gate struct {
	mu      sync.Mutex
	open    bool
	changed chan struct{}
}

// NewGate returns a gate in the given state. An open gate suits a node
// whose host clock is trusted.
func NewGate(open bool) *Gate { return &Gate{open: open} }

// Synced reports whether the gate is open.
func (g *Gate) Synced() bool {
	g.mu.Lock()
	defer g.mu.Unlock()

	return g.open
}

// Changed returns a channel closed at the next change of state. A watcher
// takes the channel before reading Synced, so no change slips between the
// two.
func (g *Gate) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()

	if g.changed == nil {
		g.changed = make(chan struct{})
	}

	return g.changed
}

// Set opens or closes the gate and reports whether that changed its state.
func (g *Gate) Set(open bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()

	if g.open == open {
		return false
	}

	g.open = open
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}

	return true
}
