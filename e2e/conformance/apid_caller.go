package conformance

import (
	"google.golang.org/grpc/codes"

	"github.com/aegis-os/aegis/authz"
)

// callerCases: only another node's apid may name the original caller of a
// call (the caller a forwarded call is logged and audited under); a client
// that names one is refused, whatever its roles and wherever it routes.
func callerCases() []*Case {
	pd := codes.PermissionDenied.String()
	forged := []string{authz.CallerSerialMetadataKey, "1", authz.CallerSubjectMetadataKey, "CN=someone else,O=os:admin"}

	return []*Case{
		callCase("an admin naming another caller × ServiceList", pd, pickAdmin, forged, callServiceList),
		callCase("an admin naming another caller × ServiceList on the worker (node: WORKER)", pd, pickAdmin,
			append([]string{"node", "WORKER"}, forged...), callServiceList),
		callCase("an admin naming another caller × GenerateClientConfiguration", pd, pickAdmin, forged, callClientConfig),
	}
}
