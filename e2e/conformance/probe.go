package conformance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// probeName is the test-only control plane's name in the cluster.
const probeName = "conformance-probe"

// Bounds of the waits on the test-only node: generous, for a busy machine.
const (
	probeBootTimeout = 3 * time.Minute
	// gateTimeout covers the time service's poll interval (64s), after
	// which a skewed answer closes the gate, and its retries.
	gateTimeout = 3 * time.Minute
	pollEvery   = 500 * time.Millisecond
)

// gateSkew is how far the suite's NTP server moves the test-only node's
// time source for the time-gate case: far past any allowed offset.
const gateSkew = time.Hour

// startProbe starts the suite's NTP server and adds the test-only control
// plane: its time comes from that server, and besides the OS CA it accepts
// the CA the rotation case removes.
func (e *Env) startProbe(ctx context.Context) error {
	ntp, err := startNTP(e.opts.NTPAddress)
	if err != nil {
		return fmt.Errorf("conformance: NTP server: %w", err)
	}

	e.ntp = ntp

	_, err = e.cluster.AddNode(ctx, localcluster.NodeSpec{
		Name: probeName, Type: certs.NodeControlPlane, Address: e.Probe,
		Configure: func(c *certs.MachineConfig) {
			c.Machine.Time = certs.TimeSpec{Servers: []string{ntp.Addr()}}
			c.Machine.AcceptedCAs = []certs.CertAndKey{{Crt: e.ids.oldCA.CertPEM}}
			// No etcd: the node leaves after the run, and a member that
			// left unannounced would cost the cluster its quorum.
			c.Cluster.Etcd = certs.EtcdSpec{Disabled: true}
		},
	}, probeBootTimeout)
	if err != nil {
		return fmt.Errorf("conformance: adding the test-only node: %w", err)
	}

	return nil
}

// stopProbe removes the test-only node from the cluster and stops the NTP
// server.
func (e *Env) stopProbe() error {
	var err error

	if _, ok := e.cluster.NodeByName(probeName); ok {
		err = e.cluster.RemoveNode(probeName)
	}

	if e.ntp != nil {
		e.ntp.Close()
	}

	return err
}

// probeCases run on the test-only node, in this order, beside the others.
func probeCases() []*Case {
	return []*Case{
		{
			Group: "apid", Name: "os:admin of a CA removed from the accepted list (rotation finished)", Expected: codes.Unauthenticated.String(),
			Nodes: []string{"PROBE"}, Setup: func(ctx context.Context, e *Env) error { return e.finishRotation(ctx) },
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return withheldCertificate(ctx, e.Probe, e.clientTLS(e.Probe, e.ids.rotated), r)
			},
		},
		{
			Group: "trustd", Name: "time gate closed (NTP server skewed by an hour)", Expected: codes.FailedPrecondition.String(),
			Nodes: []string{"PROBE"}, Setup: func(ctx context.Context, e *Env) error { return e.closeGate(ctx) },
			Run: func(ctx context.Context, e *Env, r *Report) string {
				return e.certifyAndCheck(ctx, e.Probe, []string{wire.MetadataToken, e.static}, goodCSR, codes.FailedPrecondition, r)
			},
		},
	}
}

// finishRotation checks that the node accepts the old CA's client, then
// removes the old CA from its config and reboots it through the API.
func (e *Env) finishRotation(ctx context.Context) error {
	if code := callVersion(ctx, e.Probe, e.clientTLS(e.Probe, e.ids.rotated)); code != codes.OK {
		return fmt.Errorf("the old CA's client was refused before the rotation (%s)", code)
	}

	n, _ := e.cluster.NodeByName(probeName)
	path := e.cluster.ConfigPath(n)

	cfg, err := certs.LoadMachineConfig(path, time.Now())
	if err != nil {
		return err
	}

	cfg.Machine.AcceptedCAs = nil
	if err = cfg.Save(path, true); err != nil {
		return err
	}

	return e.reboot(ctx, e.Probe)
}

// reboot reboots node through the API and waits until its boot sequence
// has ended without error and its services are up.
func (e *Env) reboot(ctx context.Context, node string) error {
	conn, err := e.admin(node)
	if err != nil {
		return err
	}

	resp, err := machine.NewMachineServiceClient(conn).Reboot(ctx, &machine.RebootRequest{})
	if err != nil {
		return fmt.Errorf("reboot: %w", err)
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("reboot: %d replies, want 1", len(resp.GetMessages()))
	}

	actor := resp.GetMessages()[0].GetActorId()

	return e.poll(ctx, probeBootTimeout, func() error {
		if err := e.bootEnded(ctx, node, actor); err != nil {
			return err
		}

		return e.servicesUp(ctx, node)
	})
}

// bootEnded looks in node's events for the end of the boot the actor
// caused; apid restarts during a reboot, so each look is a new stream.
func (e *Env) bootEnded(ctx context.Context, node, actor string) error {
	conn, err := e.admin(node)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()

	stream, err := machine.NewMachineServiceClient(conn).Events(ctx, &machine.EventsRequest{TailEvents: -1, WithActorId: actor})
	if err != nil {
		return err
	}

	for {
		ev, err := stream.Recv()
		if err != nil {
			return errors.New("boot not ended yet")
		}

		var seq machine.SequenceEvent
		if ev.GetData() == nil || ev.GetData().GetTypeUrl() != "talos/runtime/machine.SequenceEvent" ||
			proto.Unmarshal(ev.GetData().GetValue(), &seq) != nil {
			continue
		}

		if seq.GetSequence() == "boot" && seq.GetAction() == machine.SequenceEvent_STOP {
			if seq.GetError() != nil {
				return fmt.Errorf("boot failed: %s", seq.GetError().GetMessage())
			}

			return nil
		}
	}
}

// servicesUp requires every service of node to run and be healthy.
func (e *Env) servicesUp(ctx context.Context, node string) error {
	conn, err := e.admin(node)
	if err != nil {
		return err
	}

	resp, err := machine.NewMachineServiceClient(conn).ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		return err
	}

	for _, m := range resp.GetMessages() {
		for _, s := range m.GetServices() {
			if s.GetState() != "Running" || !s.GetHealth().GetHealthy() {
				return fmt.Errorf("%s is %s", s.GetId(), s.GetState())
			}
		}
	}

	return nil
}

// closeGate skews the node's time source and waits until its trustd
// reports NOT_SERVING and machined has noticed (trustd unhealthy), so the
// case's observations see a settled node.
func (e *Env) closeGate(ctx context.Context) error {
	e.ntp.Skew(gateSkew)

	return e.poll(ctx, gateTimeout, func() error {
		if st, err := e.trustdHealth(ctx, e.Probe); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			return fmt.Errorf("trustd health %s (%v)", st, err)
		}

		conn, err := e.admin(e.Probe)
		if err != nil {
			return err
		}

		resp, err := machine.NewMachineServiceClient(conn).ServiceList(ctx, &emptypb.Empty{})
		if err != nil {
			return err
		}

		for _, m := range resp.GetMessages() {
			for _, s := range m.GetServices() {
				if s.GetId() == "trustd" && !s.GetHealth().GetHealthy() && !s.GetHealth().GetUnknown() {
					return nil
				}
			}
		}

		return errors.New("machined has not noticed trustd's health yet")
	})
}

// trustdHealth asks node's trustd for its health over TLS.
func (e *Env) trustdHealth(ctx context.Context, node string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	cfg := &tls.Config{RootCAs: e.roots, ServerName: node, MinVersion: tls.VersionTLS13}

	conn, err := grpc.NewClient(trustdAddr(node), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return 0, err
	}
	defer conn.Close() //nolint:errcheck // one call

	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})

	return resp.GetStatus(), err
}

// poll calls check until it succeeds or timeout passes, and returns its
// last error.
func (e *Env) poll(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)

	for {
		err := check()
		if err == nil {
			return nil
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}
