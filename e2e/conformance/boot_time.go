package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"
)

// bootWaitingExpected is what a node rebooted while its clock is out of
// sync must show: its API answers, and the certificates service waits for
// time sync with the node's NTP server.
const bootWaitingExpected = "OK, certificates Waiting for time sync"

// bootTimeCases run on the test-only node after the time-gate case, whose
// skewed NTP server they keep: a node that holds certificates and reboots
// while it cannot sync serves its API at once and says what it waits for.
func bootTimeCases() []*Case {
	return []*Case{{
		Group: "apid", Name: "reboot while the clock is out of sync (NTP server skewed)", Expected: bootWaitingExpected,
		Nodes: []string{"PROBE"}, Setup: func(ctx context.Context, e *Env) error { return e.rebootUnsynced(ctx) },
		Run: func(ctx context.Context, e *Env, _ *Report) string {
			if code := callVersion(ctx, e.Probe, e.clientTLS(e.Probe, e.ids.admin)); code != codes.OK {
				return code.String()
			}

			if err := e.waitingForTime(ctx); err != nil {
				return err.Error()
			}

			return bootWaitingExpected
		},
	}}
}

// rebootUnsynced skews the node's time source (as the time-gate case
// leaves it), reboots the node through the API and waits until it has
// settled: apid up, trustd answering (unhealthy: it may not sign), the
// certificates service waiting for time sync.
func (e *Env) rebootUnsynced(ctx context.Context) error {
	e.ntp.Skew(gateSkew)

	conn, err := e.admin(e.Probe)
	if err != nil {
		return err
	}

	if _, err = machine.NewMachineServiceClient(conn).Reboot(ctx, &machine.RebootRequest{}); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}

	return e.poll(ctx, probeBootTimeout, func() error { return e.waitingForTime(ctx) })
}

// waitingForTime checks the node's ServiceList: apid up, trustd running
// with a known health, the certificates service Waiting on time sync with
// the suite's NTP server.
func (e *Env) waitingForTime(ctx context.Context) error {
	conn, err := e.admin(e.Probe)
	if err != nil {
		return err
	}

	resp, err := machine.NewMachineServiceClient(conn).ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		return fmt.Errorf("ServiceList: %w", err)
	}

	want := map[string]func(*machine.ServiceInfo) bool{
		"apid":   func(s *machine.ServiceInfo) bool { return s.GetState() == "Running" && s.GetHealth().GetHealthy() },
		"trustd": func(s *machine.ServiceInfo) bool { return s.GetState() == "Running" && !s.GetHealth().GetUnknown() },
		"certificates": func(s *machine.ServiceInfo) bool {
			ev := s.GetEvents().GetEvents()

			return s.GetState() == "Waiting" && len(ev) > 0 &&
				strings.HasPrefix(ev[len(ev)-1].GetMsg(), "waiting for time sync with NTP servers "+e.ntp.Addr())
		},
	}

	var off []string

	for _, m := range resp.GetMessages() {
		for _, s := range m.GetServices() {
			if ok, known := want[s.GetId()]; known && ok(s) {
				delete(want, s.GetId())
			} else if known {
				off = append(off, s.GetId()+" "+s.GetState())
			}
		}
	}

	for id := range want {
		off = append(off, id)
	}

	if len(want) > 0 {
		return errors.New("services not as expected: " + strings.Join(off, ", "))
	}

	return nil
}
