package apidtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// machineServer is the backend's MachineService; the methods it does not
// define answer Unimplemented.
type machineServer struct {
	machine.UnimplementedMachineServiceServer
	*Backend
}

// VersionTag is the version every backend reports.
const VersionTag = "v1.13.9-aegis-test"

// Version answers with the node's hostname in the reply's metadata.
func (b machineServer) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	return &machine.VersionResponse{Messages: []*machine.Version{{
		Metadata: b.feed.meta(),
		Version: &machine.VersionInfo{
			Tag: VersionTag, Sha: "0000000", Os: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		},
	}}}, nil
}

// Hostname answers the node's name in a field apid never touches, so a
// test can tell which node answered whatever apid did to the metadata.
func (b machineServer) Hostname(context.Context, *emptypb.Empty) (*machine.HostnameResponse, error) {
	return &machine.HostnameResponse{Messages: []*machine.Hostname{{Metadata: b.feed.meta(), Hostname: b.hostname}}}, nil
}

// Memory answers fixed figures.
func (b machineServer) Memory(context.Context, *emptypb.Empty) (*machine.MemoryResponse, error) {
	return &machine.MemoryResponse{Messages: []*machine.Memory{{
		Metadata: b.feed.meta(),
		Meminfo:  &machine.MemInfo{Memtotal: 8 << 20, Memfree: 4 << 20, Memavailable: 6 << 20},
	}}}, nil
}

// ServiceList lists Services, all running.
func (b machineServer) ServiceList(context.Context, *emptypb.Empty) (*machine.ServiceListResponse, error) {
	list := &machine.ServiceList{Metadata: b.feed.meta()}
	for _, svc := range Services() {
		list.Services = append(list.Services, &machine.ServiceInfo{Id: svc, State: "Running"})
	}

	return &machine.ServiceListResponse{Messages: []*machine.ServiceList{list}}, nil
}

// ServiceRestart "restarts" a service: it logs a line and publishes the
// events a restart makes.
func (b machineServer) ServiceRestart(_ context.Context, req *machine.ServiceRestartRequest) (*machine.ServiceRestartResponse, error) {
	if _, _, _, ok := b.feed.logsFrom(req.GetId(), 0); !ok {
		return nil, status.Errorf(codes.NotFound, "service %q not found", req.GetId())
	}

	b.feed.appendLog(req.GetId(), fmt.Sprintf("%s %s restarted", b.hostname, req.GetId()))
	b.feed.publish(req.GetId(), machine.ServiceStateEvent_STOPPING, "restarting")
	b.feed.publish(req.GetId(), machine.ServiceStateEvent_RUNNING, "restarted")

	return &machine.ServiceRestartResponse{Messages: []*machine.ServiceRestart{{
		Metadata: b.feed.meta(), Resp: fmt.Sprintf("Service %q restarted", req.GetId()),
	}}}, nil
}

// EtcdRecover takes a stream of chunks from the caller, as the real method
// takes a snapshot; Recovered returns them. It is the backend's one method
// with a client stream.
func (b machineServer) EtcdRecover(stream grpc.ClientStreamingServer[common.Data, machine.EtcdRecoverResponse]) error {
	var chunks [][]byte

	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return err
		}

		chunks = append(chunks, msg.GetBytes())
	}

	b.mu.Lock()
	b.recovered = append(b.recovered, chunks)
	b.mu.Unlock()

	return stream.SendAndClose(&machine.EtcdRecoverResponse{Messages: []*machine.EtcdRecover{{Metadata: b.feed.meta()}}})
}

// Logs streams a service's log: the last TailLines lines (all when
// negative), then, with Follow, every new line until the caller leaves.
func (b machineServer) Logs(req *machine.LogsRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	lines, next, changed, ok := b.feed.logsFrom(req.GetId(), 0)
	if !ok {
		return status.Errorf(codes.NotFound, "service %q not found", req.GetId())
	}

	lines = lines[tailStart(req.GetTailLines(), len(lines)):]

	if req.GetFollow() {
		b.feed.follow(followLogs, 1)
		defer b.feed.follow(followLogs, -1)
	}

	for {
		for _, l := range lines {
			if err := stream.Send(&common.Data{Metadata: b.feed.meta(), Bytes: []byte(l + "\n")}); err != nil {
				return err
			}
		}

		if !req.GetFollow() {
			return nil
		}

		if err := wait(stream.Context(), changed); err != nil {
			return status.FromContextError(err).Err()
		}

		lines, next, changed, _ = b.feed.logsFrom(req.GetId(), next)
	}
}

// Events streams the last TailEvents events (all when negative), then every
// new event until the caller leaves, as machined's Events does.
func (b machineServer) Events(req *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	events, next, changed := b.feed.eventsFrom(0)
	events = events[tailStart(req.GetTailEvents(), len(events)):]

	b.feed.follow(followEvents, 1)
	defer b.feed.follow(followEvents, -1)

	for {
		for _, ev := range events {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}

		if err := wait(stream.Context(), changed); err != nil {
			return status.FromContextError(err).Err()
		}

		events, next, changed = b.feed.eventsFrom(next)
	}
}
