package upgrade

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/rollout"
)

// fakeNodes is a MachineService answering for the node named by the
// `node` metadata of each call, as an endpoint that routes would.
type fakeNodes struct {
	machine.UnimplementedMachineServiceServer

	mu       sync.Mutex
	tags     map[string]string                 // VersionInfo.Tag by node
	services map[string][]*machine.ServiceInfo // by node
	etcd     map[string]*machine.EtcdMemberStatus
	refuse   map[string]error // Upgrade's error by node
	upgrades []string         // "NODE IMAGE preserve"
}

func nodeOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("node"); len(v) == 1 {
		return v[0]
	}

	return ""
}

func (f *fakeNodes) Version(ctx context.Context, _ *emptypb.Empty) (*machine.VersionResponse, error) {
	return &machine.VersionResponse{Messages: []*machine.Version{{Version: &machine.VersionInfo{Tag: f.tags[nodeOf(ctx)]}}}}, nil
}

func (f *fakeNodes) ServiceList(ctx context.Context, _ *emptypb.Empty) (*machine.ServiceListResponse, error) {
	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Services: f.services[nodeOf(ctx)]}}}, nil
}

func (f *fakeNodes) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machine.EtcdStatusResponse, error) {
	return &machine.EtcdStatusResponse{Messages: []*machine.EtcdStatus{{MemberStatus: f.etcd[nodeOf(ctx)]}}}, nil
}

func (f *fakeNodes) Upgrade(ctx context.Context, req *machine.UpgradeRequest) (*machine.UpgradeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	preserve := ""
	if req.GetPreserve() {
		preserve = " preserve"
	}

	if err := f.refuse[nodeOf(ctx)]; err != nil {
		return nil, err
	}

	f.upgrades = append(f.upgrades, nodeOf(ctx)+" "+req.GetImage()+preserve)

	return &machine.UpgradeResponse{Messages: []*machine.Upgrade{{Ack: "upgrade started"}}}, nil
}

// remoteOf serves f on a Unix socket and returns a Remote calling it.
func remoteOf(t *testing.T, f *fakeNodes, upload UploadFunc) *Remote {
	t.Helper()

	path := filepath.Join(t.TempDir(), "api.sock")

	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}

	s := grpc.NewServer()
	machine.RegisterMachineServiceServer(s, f)

	go s.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(s.Stop)

	c, err := client.New(t.Context(), client.WithUnixSocket(path),
		client.WithGRPCDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck // test cleanup

	return &Remote{Walker: rollout.New(rollout.Options{Client: c}), Upload: upload}
}

func running(ids ...string) []*machine.ServiceInfo {
	var out []*machine.ServiceInfo
	for _, id := range ids {
		out = append(out, &machine.ServiceInfo{Id: id, State: "Running", Health: &machine.ServiceHealth{Healthy: true}})
	}

	return out
}

var (
	cp     = rollout.Member{Name: "cp-1", Addr: "10.0.0.2", Role: "controlplane"}
	worker = rollout.Member{Name: "w-1", Addr: "10.0.1.2", Role: "worker"}
)

// TestRemote: each call goes to its member by `node` metadata; the version
// is Aegis's own out of the Talos tag; a member is healthy when its
// services are up and, on a control plane, etcd runs as a voter without
// errors; Upgrade names the delivered reference and preserves the node's
// state; Deliver hands the upload a context routed to the member.
func TestRemote(t *testing.T) {
	f := &fakeNodes{
		tags: map[string]string{cp.Addr: version.TalosTagOf("v0.3.0+2.gabcdefabcdef"), worker.Addr: "v1.13.9"},
		services: map[string][]*machine.ServiceInfo{
			cp.Addr: running("apid", "trustd", "etcd"), worker.Addr: running("apid"),
		},
		etcd: map[string]*machine.EtcdMemberStatus{cp.Addr: {}},
	}

	var uploadedTo string

	r := remoteOf(t, f, func(ctx context.Context, _ *client.Client, path string) (string, error) {
		md, _ := metadata.FromOutgoingContext(ctx)
		uploadedTo = strings.Join(md.Get("node"), ",")

		return "upload-" + path, nil
	})
	ctx := t.Context()

	if v, err := r.Version(ctx, cp); err != nil || v != "v0.3.0+2.gabcdefabcdef" {
		t.Fatalf("Version of cp-1: %q, %v", v, err)
	}

	if _, err := r.Version(ctx, worker); err == nil || !strings.Contains(err.Error(), `"v1.13.9", which names no Aegis version`) {
		t.Fatalf("Version of a node whose tag is no Aegis one: %v", err)
	}

	for _, m := range []rollout.Member{cp, worker} {
		if err := r.Healthy(ctx, m); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}

	f.etcd[cp.Addr] = &machine.EtcdMemberStatus{IsLearner: true}
	if err := r.Healthy(ctx, cp); err == nil || !strings.Contains(err.Error(), "learner") {
		t.Fatalf("a learner: %v", err)
	}

	f.etcd[cp.Addr] = &machine.EtcdMemberStatus{Errors: []string{"NOSPACE"}}
	if err := r.Healthy(ctx, cp); err == nil || !strings.Contains(err.Error(), "NOSPACE") {
		t.Fatalf("etcd with an alarm: %v", err)
	}

	f.services[cp.Addr] = running("apid", "trustd")
	if err := r.Healthy(ctx, cp); err == nil || err.Error() != "etcd is not running" {
		t.Fatalf("a control plane without etcd: %v", err)
	}

	f.services[worker.Addr] = []*machine.ServiceInfo{{Id: "apid", State: "Failed"}}
	if err := r.Healthy(ctx, worker); err == nil || err.Error() != "apid is Failed" {
		t.Fatalf("a failed service: %v", err)
	}

	ref, err := r.Deliver(ctx, worker, "b.tar")
	if err != nil || ref != "upload-b.tar" || uploadedTo != worker.Addr {
		t.Fatalf("Deliver: %q, %v, routed to %q", ref, err, uploadedTo)
	}

	if err = r.Upgrade(ctx, worker, ref); err != nil {
		t.Fatal(err)
	}

	if len(f.upgrades) != 1 || f.upgrades[0] != "10.0.1.2 upload-b.tar preserve" {
		t.Fatalf("upgrades %v", f.upgrades)
	}
}

// TestRemoteUpgradeRefused: an Upgrade call answered with a verdict is
// ErrNotStarted; one that failed otherwise may have started.
func TestRemoteUpgradeRefused(t *testing.T) {
	f := &fakeNodes{refuse: map[string]error{
		cp.Addr:     status.Error(codes.FailedPrecondition, "etcd would lose quorum: cp-2 is down"),
		worker.Addr: status.Error(codes.Internal, "internal error"),
	}}
	r := remoteOf(t, f, nil)

	if err := r.Upgrade(t.Context(), cp, "ref"); !errors.Is(err, ErrNotStarted) || !strings.Contains(err.Error(), "cp-2 is down") {
		t.Fatalf("a refusal: %v", err)
	}

	if err := r.Upgrade(t.Context(), worker, "ref"); err == nil || errors.Is(err, ErrNotStarted) {
		t.Fatalf("an internal error: %v", err)
	}
}

// TestRemoteUploadError: an upload that fails is Deliver's error.
func TestRemoteUploadError(t *testing.T) {
	r := remoteOf(t, &fakeNodes{}, func(context.Context, *client.Client, string) (string, error) {
		return "", errors.New("too large")
	})

	if _, err := r.Deliver(t.Context(), worker, "b.tar"); err == nil || err.Error() != "too large" {
		t.Fatalf("Deliver: %v", err)
	}
}
