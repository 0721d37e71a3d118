package node

import (
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// newHealth is machined.sock's grpc.health.v1 service, NOT_SERVING until
// the first boot is ready. apid follows it (see apid's health), so a
// supervisor or load balancer learns the node's state without credentials.
func newHealth() *health.Server {
	h := health.NewServer()
	setHealth(h, false)

	return h
}

// setHealth reports the node as a whole ("") and MachineService alike:
// SERVING exactly when the machine status says ready (the boot reached
// RUNNING and no condition, such as time sync, is unmet), so a node that
// reboots, shuts down or waits for its clock is NOT_SERVING.
func setHealth(h *health.Server, ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}

	h.SetServingStatus("", st)
	h.SetServingStatus(machine.MachineService_ServiceDesc.ServiceName, st)
}
