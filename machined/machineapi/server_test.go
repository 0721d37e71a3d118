package machineapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/logs"
	"github.com/aegis-os/aegis/machined/system/runner"
)

type testNode struct {
	mgr     *system.Manager
	bus     *events.Bus
	logs    map[string]*logs.Log
	mu      sync.Mutex
	reboots []string
	resets  []string // actor, graceful, reboot of each reset
	refuse  error    // CheckReset's answer
}

func (n *testNode) ServiceLog(id string) (*logs.Log, bool) { l, ok := n.logs[id]; return l, ok }
func (n *testNode) Reboot(actor string) {
	n.mu.Lock()
	n.reboots = append(n.reboots, actor)
	n.mu.Unlock()
}
func (n *testNode) Shutdown(string)                        {}
func (n *testNode) CheckReset(context.Context, bool) error { return n.refuse }
func (n *testNode) Reset(actor string, graceful, reboot bool) {
	n.mu.Lock()
	n.resets = append(n.resets, fmt.Sprint(actor, graceful, reboot))
	n.mu.Unlock()
}

type echoService struct {
	id    string
	log   io.Writer
	allow bool
}

func (e *echoService) ID() string          { return e.id }
func (e *echoService) DependsOn() []string { return nil }
func (e *echoService) Runner() (runner.Runner, error) {
	return runner.Goroutine(e.id, e.log, func(ctx context.Context, w io.Writer) error {
		fmt.Fprintln(w, "hello from", e.id)
		<-ctx.Done()

		return nil
	}), nil
}

func (e *echoService) AllowAPI(system.Action) error {
	if e.allow {
		return nil
	}

	return errors.New("it is essential to the node")
}

// issuer implements ClientConfigIssuer with a real CA.
type issuer struct{ iss *ca.Issuer }

func (i issuer) IssueClientConfig(roles role.Set, ttl time.Duration) ([]byte, []byte, []byte, []byte, error) {
	cc, err := certs.NewClientCertificate(i.iss, certs.ClientCertOptions{Roles: roles, TTL: ttl})
	if err != nil {
		return nil, nil, nil, nil, err
	}

	cfg, err := certs.NewClientConfig("test", []string{"127.0.0.1"}, i.iss.CA().CertPEM, cc).Marshal()

	return i.iss.CA().CertPEM, cc.Cert.PEM, cc.Key, cfg, err
}

func startServer(t *testing.T, withIssuer bool) (machine.MachineServiceClient, *testNode) {
	t.Helper()

	dir := t.TempDir()
	clk := clock.Real()
	bus := events.NewBus(256, clk)
	n := &testNode{mgr: system.New(system.Config{Bus: bus, Clock: clk}), bus: bus, logs: map[string]*logs.Log{}}

	for _, svc := range []*echoService{{id: "apid", allow: true}, {id: "trustd"}} {
		l, err := logs.Open(filepath.Join(dir, svc.id+".log"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { l.Close() })

		n.logs[svc.id], svc.log = l, l

		if err := n.mgr.Load(svc); err != nil {
			t.Fatal(err)
		}
	}

	meminfo := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:       8128464 kB\nMemFree:         2448128 kB\nMemAvailable:    6730720 kB\nBuffers:           54528 kB\nCached:          3813888 kB\nShmem:            148992 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := Config{Hostname: func() string { return "node-1" }, Services: n.mgr, Logs: n, Bus: bus, Lifecycle: n, Reset: n, MemInfoPath: meminfo}
	if withIssuer {
		cfg.ClientConfig = issuer{catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, time.Now()), time.Now())}
	}

	sock := filepath.Join(dir, "machined.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer()
	New(cfg).Register(g)

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_ = n.mgr.Start()
	if err := n.mgr.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}

	return machine.NewMachineServiceClient(conn), n
}

func TestInfoMethods(t *testing.T) {
	c, _ := startServer(t, false)
	ctx := context.Background()

	v, err := c.Version(ctx, &emptypb.Empty{})
	if err != nil || v.Messages[0].Version.Tag != version.TalosTag() || v.Messages[0].Platform.Name != "aegis" {
		t.Fatalf("Version = %v, %v", v, err)
	}

	h, err := c.Hostname(ctx, &emptypb.Empty{})
	if err != nil || h.Messages[0].Hostname != "node-1" {
		t.Fatalf("Hostname = %v, %v", h, err)
	}

	m, err := c.Memory(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	mi := m.Messages[0].Meminfo
	if mi.Memtotal != 8128464 || mi.Memavailable != 6730720 || mi.Shmem != 148992 {
		t.Fatalf("meminfo = %v", mi)
	}

	if _, err := c.Containers(ctx, &machine.ContainersRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Containers on a node without containerd: %v, want FailedPrecondition", err)
	}

	if _, err := c.Rollback(ctx, &machine.RollbackRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Rollback on a node without slots: %v, want FailedPrecondition", err)
	}
}

func TestServiceMethods(t *testing.T) {
	c, _ := startServer(t, false)
	ctx := context.Background()

	list, err := c.ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	var ids []string
	for _, s := range list.Messages[0].Services {
		ids = append(ids, s.Id+"="+s.State)
	}

	if got := strings.Join(ids, ","); got != "apid=Running,trustd=Running" {
		t.Fatalf("services = %s", got)
	}

	if n := len(list.Messages[0].Services[0].Events.Events); n < 3 {
		t.Fatalf("apid has %d events", n)
	}

	tests := []struct {
		id   string
		code codes.Code
	}{
		{id: "apid", code: codes.OK},
		{id: "trustd", code: codes.FailedPrecondition},
		{id: "ghost", code: codes.NotFound},
		{id: "", code: codes.InvalidArgument},
	}

	for _, tt := range tests {
		_, err := c.ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: tt.id})
		if status.Code(err) != tt.code {
			t.Errorf("restart %q: %v, want %s", tt.id, err, tt.code)
		}
	}
}

func TestLogs(t *testing.T) {
	c, n := startServer(t, false)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	stream, err := c.Logs(ctx, &machine.LogsRequest{Id: "apid", Follow: true, TailLines: -1})
	if err != nil {
		t.Fatal(err)
	}

	var got strings.Builder

	for !strings.Contains(got.String(), "hello from apid") {
		d, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}

		got.Write(d.Bytes)
	}

	fmt.Fprintln(n.logs["apid"], "a new line")

	for !strings.Contains(got.String(), "a new line") {
		d, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}

		got.Write(d.Bytes)
	}

	missing, err := c.Logs(ctx, &machine.LogsRequest{Id: "ghost"})
	if err == nil {
		_, err = missing.Recv()
	}

	// Talos's words: its LogsSuite matches `log "nosuchservice" was not registered$`.
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != `log "ghost" was not registered` {
		t.Fatalf("logs of unknown service: %v", err)
	}
}

// TestEventsDecodeWithTalosClient: the Talos client's own decoder reads the
// events, tail and follow, with the right type URLs.
func TestEventsDecodeWithTalosClient(t *testing.T) {
	c, n := startServer(t, false)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	stream, err := c.Events(ctx, &machine.EventsRequest{TailEvents: 3})
	if err != nil {
		t.Fatal(err)
	}

	if first, err := stream.Recv(); err != nil || first.Data != nil {
		t.Fatalf("first event = %v, %v; want the empty sync event", first, err)
	}

	for range 3 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}

		decoded, err := client.UnmarshalEvent(ev)
		if err != nil {
			t.Fatalf("Talos client cannot decode %s: %v", ev.Data.TypeUrl, err)
		}

		if _, ok := decoded.Payload.(*machine.ServiceStateEvent); !ok {
			t.Fatalf("payload %T", decoded.Payload)
		}
	}

	n.bus.Publish(&machine.PhaseEvent{Phase: "test", Action: machine.PhaseEvent_START}, "actor-9")

	ev, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}

	decoded, err := client.UnmarshalEvent(ev)
	if err != nil || decoded.ActorID != "actor-9" {
		t.Fatalf("followed event = %+v, %v", decoded, err)
	}

	if pe, ok := decoded.Payload.(*machine.PhaseEvent); !ok || pe.Phase != "test" {
		t.Fatalf("payload = %v", decoded.Payload)
	}
}

func TestGenerateClientConfiguration(t *testing.T) {
	ctx := context.Background()

	worker, _ := startServer(t, false)
	if _, err := worker.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("worker: %v", err)
	}

	cp, _ := startServer(t, true)

	resp, err := cp.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{
		Roles: []string{"os:reader"}, CrtTtl: durationpb.New(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}

	msg := resp.Messages[0]

	crt, err := ca.ParseCertificate(msg.Crt)
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Equal(crt.Subject.Organization, []string{"os:reader"}) || crt.NotAfter.Sub(crt.NotBefore) != time.Hour {
		t.Fatalf("certificate O=%v life=%s", crt.Subject.Organization, crt.NotAfter.Sub(crt.NotBefore))
	}

	if _, err := certs.ParseClientConfig("generated", msg.Talosconfig); err != nil {
		t.Fatalf("generated client config: %v", err)
	}

	if _, err := certs.NewKeyPair(msg.Crt, msg.Key); err != nil {
		t.Fatalf("key does not match certificate: %v", err)
	}

	// A lifetime too short to be of use, or malformed, is the caller's
	// mistake, named as such, never a failure of the node.
	for _, bad := range []*durationpb.Duration{
		durationpb.New(time.Nanosecond), durationpb.New(time.Millisecond), durationpb.New(-time.Hour),
		{Seconds: 1, Nanos: -1}, {Seconds: 315576000001},
	} {
		_, err := cp.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}, CrtTtl: bad})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "crt_ttl") {
			t.Errorf("crt_ttl %v: %v, want InvalidArgument naming crt_ttl", bad, err)
		}
	}

	for _, bad := range [][]string{{"os:root"}, {}, {"os:impersonator"}} {
		_, err := cp.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{Roles: bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("roles %q: %v, want InvalidArgument", bad, err)
		}
	}
}

func TestRebootTagsActor(t *testing.T) {
	c, n := startServer(t, false)

	resp, err := c.Reboot(context.Background(), &machine.RebootRequest{})
	if err != nil {
		t.Fatal(err)
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	if len(n.reboots) != 1 || n.reboots[0] != resp.Messages[0].ActorId || resp.Messages[0].ActorId == "" {
		t.Fatalf("reboots = %v, reply actor %q", n.reboots, resp.Messages[0].ActorId)
	}
}

func TestParseMemInfoRefusesGarbage(t *testing.T) {
	for _, in := range []string{"", "MemTotal: lots kB\n", "Foo: 1 kB\n"} {
		if _, err := parseMemInfo([]byte(in)); err == nil {
			t.Errorf("parseMemInfo(%q) accepted", in)
		}
	}
}
