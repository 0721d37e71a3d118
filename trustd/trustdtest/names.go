package trustdtest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/trustd"
)

// Names is an in-memory trustd.Names: the control planes' names a test
// sets, and bindings that end at their NotAfter by its clock. It follows
// the rules of the etcd record (trustd/namestore): a live binding holds a
// name against every other address, and a binding by a holder's address
// is extended, never shortened.
type Names struct {
	clock clock.Clock

	mu            sync.Mutex
	controlPlanes []string
	bindings      map[string]trustd.Binding
}

var _ trustd.Names = (*Names)(nil)

// NewNames makes a record with the given control planes' names, on clk
// (nil: the system clock).
func NewNames(clk clock.Clock, controlPlanes ...string) *Names {
	clk = defaults.Clock(clk)

	return &Names{clock: clk, controlPlanes: controlPlanes, bindings: map[string]trustd.Binding{}}
}

// ControlPlaneNames returns the names set.
func (n *Names) ControlPlaneNames(context.Context) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()

	return slices.Clone(n.controlPlanes), nil
}

// Check refuses a name bound to another address.
func (n *Names) Check(_ context.Context, name string, source netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.refuse(name, source)
}

// Bind binds the name unless another address holds it.
func (n *Names) Bind(_ context.Context, b trustd.Binding) error {
	n.mu.Lock()
	defer n.mu.Unlock()

	if err := n.refuse(b.Name, b.Source); err != nil {
		return err
	}

	if old, ok := n.bindings[b.Name]; ok && old.NotAfter.After(b.NotAfter) {
		b.NotAfter = old.NotAfter
	}

	n.bindings[b.Name] = b

	return nil
}

// Bound returns the binding of name, if any.
func (n *Names) Bound(name string) (trustd.Binding, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()

	b, ok := n.bindings[name]

	return b, ok
}

func (n *Names) refuse(name string, source netip.Addr) error {
	b, ok := n.bindings[name]
	if !ok || !n.clock.Now().Before(b.NotAfter) || slices.Contains(b.Addresses, source.Unmap()) {
		return nil
	}

	return fmt.Errorf("%w: %s is bound to the node at %v until %s", trustd.ErrNameHeld, name, b.Addresses, b.NotAfter)
}
