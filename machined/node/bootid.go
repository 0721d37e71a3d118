package node

import (
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/machineapi"
)

// bootID is the node's boot ID, which the MachineService's Read serves as
// /proc/sys/kernel/random/boot_id. A host's kernel makes a new one at each
// of its boots, and that one never changes while machined runs on it; a
// node boots again at each reboot (its services stopped, its boot sequence
// run again) without the host, so the node makes its own, at the start of
// each boot. talosctl reboot --wait, and Talos's tests, read it before a
// reboot and wait until it differs: that is when the node has booted again.
type bootID struct {
	id atomic.Pointer[string]
}

// renew makes the boot ID of a new boot. Without randomness it keeps the
// one before, and says so: a waiter then waits until its timeout.
func (b *bootID) renew(r io.Reader, log *slog.Logger) {
	id, err := machineapi.NewBootID(r)
	if err != nil {
		log.Error("boot ID kept from the boot before", slog.String(logkey.Error, err.Error()))

		return
	}

	b.id.Store(&id)
}

// current is the boot ID of the boot under way, empty before the first.
func (b *bootID) current() string {
	if id := b.id.Load(); id != nil {
		return *id
	}

	return ""
}
