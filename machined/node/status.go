package node

import (
	"strings"
	"sync"

	"google.golang.org/grpc/health"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/system"
)

// machineState is the machine's stage and unmet conditions as the node
// last published them, with what follows them: machined.sock's health and
// the MachineStatuses resource.
type machineState struct {
	// mu guards stage and unmet, and makes the resource's updates one at
	// a time, each from the latest state.
	mu     sync.Mutex
	stage  machine.MachineStatusEvent_MachineStage
	unmet  []*machine.MachineStatusEvent_MachineStatus_UnmetCondition
	health *health.Server // machined.sock's grpc.health.v1
	deps   deps
	// ready is closed the first time the machine is ready: a version on
	// trial is then confirmed.
	ready     chan struct{}
	readyOnce *sync.Once
}

func newMachineState(d deps) machineState {
	return machineState{health: newHealth(), deps: d, ready: make(chan struct{}), readyOnce: &sync.Once{}}
}

// machineStatus publishes the machine's stage and, with reason set, that
// it waits for time sync (the one condition a boot reports as unmet).
func (n *Node) machineStatus(stage machine.MachineStatusEvent_MachineStage, actor string, unmet ...*machine.MachineStatusEvent_MachineStatus_UnmetCondition) {
	ready := n.status.set(stage, unmet)

	n.bus.Publish(&machine.MachineStatusEvent{Stage: stage, Status: &machine.MachineStatusEvent_MachineStatus{
		Ready: ready, UnmetConditions: unmet,
	}}, actor)
}

// unmetTime reports the wait for time sync (reason set) or its end.
func (n *Node) unmetTime(reason string) {
	var unmet []*machine.MachineStatusEvent_MachineStatus_UnmetCondition
	if reason != "" {
		unmet = append(unmet, &machine.MachineStatusEvent_MachineStatus_UnmetCondition{Name: "time", Reason: reason})
	}

	n.machineStatus(n.status.currentStage(), "", unmet...)
}

// set records the stage and conditions, sets the health and the resource
// from them, and reports whether the machine is ready.
func (s *machineState) set(stage machine.MachineStatusEvent_MachineStage, unmet []*machine.MachineStatusEvent_MachineStatus_UnmetCondition) bool {
	s.mu.Lock()
	s.stage, s.unmet = stage, unmet
	s.mu.Unlock()

	ready := stage == machine.MachineStatusEvent_RUNNING && len(unmet) == 0
	setHealth(s.health, ready)
	s.refresh()

	return ready
}

func (s *machineState) currentStage() machine.MachineStatusEvent_MachineStage {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.stage
}

// refresh sets MachineStatuses/machine from the stage and conditions the
// node last published and from its services now: as in Talos, a running
// node with a service down is not ready, and its unmet "services"
// condition names them. etcd waiting for a bootstrap or a cluster to join
// is not down (the boot does not wait for it either).
func (s *machineState) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()

	conds := make([]resourceapi.Condition, 0, len(s.unmet)+1)
	for _, u := range s.unmet {
		conds = append(conds, resourceapi.Condition{Name: u.GetName(), Reason: u.GetReason()})
	}

	if s.stage == machine.MachineStatusEvent_RUNNING {
		if down := downServices(s.deps.services.List()); len(down) > 0 {
			conds = append(conds, resourceapi.Condition{Name: "services", Reason: "not up: " + strings.Join(down, ", ")})
		}
	}

	ready := s.stage == machine.MachineStatusEvent_RUNNING && len(conds) == 0
	if ready {
		s.readyOnce.Do(func() { close(s.ready) })
	}

	s.deps.resourceErr("machine status", s.deps.res.SetMachineStatus(s.stage, ready, conds))
}

// downServices are the services not up, but etcd waiting to be
// bootstrapped or to join.
func downServices(list []system.Info) []string {
	var down []string

	for _, info := range list {
		if !info.Up() && (info.ID != etcd.ServiceID || info.State != system.StateWaiting) {
			down = append(down, info.ID)
		}
	}

	return down
}
