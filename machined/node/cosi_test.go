package node

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

// machineStatus reads the node's MachineStatus resource.
func (h *bootHarness) machineStatus() *runtime.MachineStatusSpec {
	h.t.Helper()

	ms, err := safe.StateGet[*runtime.MachineStatus](h.ctx, state.WrapCore(h.n.res.Reader()), runtime.NewMachineStatus().Metadata())
	if err != nil {
		h.t.Fatal(err)
	}

	return ms.TypedSpec()
}

// unmetNames reports whether the "services" condition names id.
func unmetNames(s *runtime.MachineStatusSpec, id string) bool {
	for _, c := range s.Status.UnmetConditions {
		if c.Name == "services" && slices.Contains(strings.Split(strings.TrimPrefix(c.Reason, "not up: "), ", "), id) {
			return true
		}
	}

	return false
}

// TestMachineStatusResourceFollowsServices: a running node with a service
// down is not ready, and its "services" condition names the service; the
// services resources follow the manager; the certificates appear without
// their keys.
func TestMachineStatusResourceFollowsServices(t *testing.T) {
	h := newBootHarness(t, t.TempDir(), nil)
	h.ntp.on.Store(true)
	h.boot()

	ctx, cancel := context.WithCancel(h.ctx)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	h.n.followResources(ctx, &wg)

	if err := h.n.services.WaitUp(h.ctx, "apid"); err != nil {
		t.Fatal(err)
	}

	h.n.machineStatus(machine.MachineStatusEvent_RUNNING, "")

	if s := h.machineStatus(); s.Stage != runtime.MachineStageRunning || unmetNames(s, "apid") {
		t.Fatalf("machine status with apid up = %+v", s)
	}

	if err := h.n.services.Stop(h.ctx, "apid"); err != nil {
		t.Fatal(err)
	}

	h.n.status.refresh()

	if s := h.machineStatus(); s.Status.Ready || !unmetNames(s, "apid") {
		t.Fatalf("machine status with apid stopped = %+v", s)
	}

	// The services resources follow the manager on their own goroutine.
	_, err := state.WrapCore(h.n.res.Reader()).WatchFor(h.ctx, v1alpha1.NewService("apid").Metadata(),
		state.WithCondition(func(r resource.Resource) (bool, error) {
			svc, ok := r.(*v1alpha1.Service)

			return ok && !svc.TypedSpec().Running, nil
		}))
	if err != nil {
		t.Fatalf("apid's service resource never showed it stopped: %v", err)
	}

	h.n.certRes.refresh()

	certs, err := safe.StateListAll[*resourcetypes.CertificateStatus](h.ctx, state.WrapCore(h.n.res.Reader()))
	if err != nil || certs.Len() < 3 {
		t.Fatalf("certificate statuses = %v, %v", certs, err)
	}
}
