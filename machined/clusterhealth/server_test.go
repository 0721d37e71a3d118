package clusterhealth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/membership"
)

type fixedMembers []*membership.Member

func (f fixedMembers) List(context.Context) ([]*membership.Member, error) { return f, nil }

type fixedEtcd []etcd.MemberHealth

func (f fixedEtcd) Health(context.Context) ([]etcd.MemberHealth, error) { return f, nil }

// flakyProber fails the worker's probe for its first failures calls.
type flakyProber struct{ failures int }

func (p *flakyProber) Probe(_ context.Context, addr string) (Probe, error) {
	if addr == "10.0.0.5" && p.failures > 0 {
		p.failures--

		return Probe{}, errors.New("connection refused")
	}

	svcs := []*machine.ServiceInfo{{Id: "apid", State: "Running"}}
	if addr == "10.0.0.1" {
		svcs = append(svcs, &machine.ServiceInfo{Id: "trustd", State: "Running"}, &machine.ServiceInfo{Id: "etcd", State: "Running"})
	}

	return Probe{Services: svcs}, nil
}

// sink is a HealthCheck stream that keeps the messages.
type sink struct {
	grpc.ServerStream

	ctx  context.Context
	msgs []string
}

func (s *sink) Context() context.Context { return s.ctx }

func (s *sink) Send(p *cluster.HealthCheckProgress) error {
	s.msgs = append(s.msgs, p.GetMessage())

	return nil
}

func newTestServer(prober Prober, clk clock.Clock) *Server {
	return New(Config{
		Members: fixedMembers{member("cp-1", "10.0.0.1", membership.RoleControlPlane), member("w-1", "10.0.0.5", membership.RoleWorker)},
		Etcd:    func() (Etcd, error) { return fixedEtcd{{ID: 1, Name: "cp-1", Leader: 1}}, nil },
		Prober:  prober, Clock: clk,
	})
}

func TestHealthCheckWaitsAndReportsChanges(t *testing.T) {
	clk := clock.NewFake(time.Now())
	srv := newTestServer(&flakyProber{failures: 2}, clk)
	stream := &sink{ctx: context.Background()}
	done := make(chan error, 1)

	go func() {
		done <- srv.HealthCheck(&cluster.HealthCheckRequest{WaitTimeout: durationpb.New(time.Minute)}, stream)
	}()

	for range 2 { // two failed rounds, each waiting on the clock
		if err := clk.WaitForTimers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}

		clk.Advance(PollInterval)
	}

	if err := <-done; err != nil {
		t.Fatalf("HealthCheck: %v\n%s", err, strings.Join(stream.msgs, "\n"))
	}

	// Each verdict once, the worker's twice (failing, then ok), then the end.
	got := strings.Join(stream.msgs, "\n")
	if strings.Count(got, "node w-1 (10.0.0.5): apid not answering: connection refused") != 1 ||
		!strings.Contains(got, "node w-1 (10.0.0.5): ok") || strings.Count(got, "etcd: ok") != 1 ||
		!strings.HasPrefix(stream.msgs[len(stream.msgs)-1], "cluster healthy: 5 checks passed") {
		t.Fatalf("messages:\n%s", got)
	}
}

func TestHealthCheckFailsNamingWhatIsWrong(t *testing.T) {
	srv := newTestServer(&flakyProber{failures: 1}, clock.NewFake(time.Now()))
	stream := &sink{ctx: context.Background()}

	// No wait timeout: one round.
	err := srv.HealthCheck(&cluster.HealthCheckRequest{}, stream)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node w-1 (10.0.0.5): apid not answering") {
		t.Fatalf("HealthCheck: %v", err)
	}
}

func TestHealthCheckOnAWorker(t *testing.T) {
	err := New(Config{}).HealthCheck(&cluster.HealthCheckRequest{}, &sink{ctx: context.Background()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no control plane") {
		t.Fatalf("HealthCheck on a worker: %v", err)
	}
}
