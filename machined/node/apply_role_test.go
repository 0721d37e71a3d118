package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/machineapi"
)

// TestClassifyRefusesTheOtherMachineType: behind apid, machined refuses a
// config of the other machine type as an identity change, both ways; a
// move within the control planes (init, controlplane) only needs a reboot.
func TestClassifyRefusesTheOtherMachineType(t *testing.T) {
	cp := controlPlaneConfig(t, clock.NewFake(epoch))

	for _, tt := range []struct {
		from, to certs.NodeType
		refused  bool
	}{
		{certs.NodeControlPlane, certs.NodeWorker, true},
		{certs.NodeWorker, certs.NodeControlPlane, true},
		{certs.NodeInit, certs.NodeControlPlane, false},
	} {
		cur, next := *cp, *cp
		cur.Machine.Type, next.Machine.Type = tt.from, tt.to

		_, err := classify(&cur, &next)
		if got := err != nil && errors.Is(err, machineapi.ErrBadRequest) && strings.Contains(err.Error(), "machine.type"); got != tt.refused {
			t.Errorf("%s → %s: %v, refused %v, want %v", tt.from, tt.to, err, got, tt.refused)
		}
	}
}
