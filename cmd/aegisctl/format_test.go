package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// unreachable is how apid tags a node it could not dial.
func unreachable(node string) *common.Metadata {
	st := status.New(codes.Unavailable,
		`connection error: desc = "transport: Error while dialing: dial tcp `+node+`:50000: connect: connection refused"`)

	//nolint:staticcheck // Error is the field Talos clients read.
	return &common.Metadata{Hostname: node, Error: st.Err().Error(), Status: st.Proto()}
}

func memInfo(totalMiB, freeMiB, sharedMiB, buffersMiB, cacheMiB, availableMiB uint64) *machine.MemInfo {
	const kb = 1024

	return &machine.MemInfo{
		Memtotal: totalMiB * kb, Memfree: freeMiB * kb, Shmem: sharedMiB * kb,
		Buffers: buffersMiB * kb, Cached: cacheMiB * kb, Memavailable: availableMiB * kb,
	}
}

func memoryFanOut() *machine.MemoryResponse {
	return &machine.MemoryResponse{Messages: []*machine.Memory{
		{Metadata: &common.Metadata{Hostname: "127.6.0.2"}, Meminfo: memInfo(7938, 2390, 145, 53, 3724, 6571)},
		{Metadata: &common.Metadata{Hostname: "127.6.0.3"}, Meminfo: memInfo(15876, 12010, 12, 101, 2209, 14120)},
		{Metadata: unreachable("127.6.0.4")},
	}}
}

func TestMemoryOutput(t *testing.T) {
	single := &machine.MemoryResponse{Messages: []*machine.Memory{{Meminfo: memInfo(7938, 2390, 145, 53, 3724, 6571)}}}

	tests := []struct {
		name   string
		format outputFormat
		resp   *machine.MemoryResponse
		named  bool
	}{
		{name: "memory.golden", format: formatTable, resp: memoryFanOut(), named: true},
		{name: "memory-single.golden", format: formatTable, resp: single},
		{name: "memory.json.golden", format: formatJSON, resp: memoryFanOut(), named: true},
		{name: "memory.yaml.golden", format: formatYAML, resp: memoryFanOut(), named: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer

			err := printReply(&out, tt.format, tt.resp, false, func(w io.Writer) { memoryTable(w, tt.resp, tt.named) })
			if err != nil {
				t.Fatal(err)
			}

			golden.Compare(t, tt.name, out.Bytes())
		})
	}
}

func TestFailedNodes(t *testing.T) {
	err := failedNodes(memoryFanOut())

	var partial *partialError
	if !errors.As(err, &partial) || err.Error() != "1 of 3 nodes failed: 127.6.0.4" {
		t.Fatalf("failedNodes = %v", err)
	}

	if partial.failed[0].text != "unreachable: dial tcp 127.6.0.4:50000: connect: connection refused" {
		t.Fatalf("failure text = %q", partial.failed[0].text)
	}

	if err := failedNodes(&machine.MemoryResponse{Messages: memoryFanOut().GetMessages()[:2]}); err != nil {
		t.Fatalf("no failure: %v", err)
	}

	// Replies outside the messages convention have no failures to find.
	if err := failedNodes(&common.Metadata{}); err != nil {
		t.Fatal(err)
	}
}

func TestServiceListOutput(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	events := func(msgs ...string) *machine.ServiceEvents {
		ev := &machine.ServiceEvents{}
		for i, m := range msgs {
			ev.Events = append(ev.Events, &machine.ServiceEvent{Msg: m, State: "Running", Ts: timestamppb.New(now.Add(time.Duration(i-len(msgs)) * time.Minute))})
		}

		return ev
	}

	resp := &machine.ServiceListResponse{Messages: []*machine.ServiceList{
		{Metadata: &common.Metadata{Hostname: "127.6.0.2"}, Services: []*machine.ServiceInfo{
			{Id: "apid", State: "Running", Health: &machine.ServiceHealth{Healthy: true}, Events: events("loaded", "process 12 started")},
			{Id: "trustd", State: "Failed", Health: &machine.ServiceHealth{LastMessage: "connection refused"}, Events: events("exit status 1")},
		}},
		{Metadata: &common.Metadata{Hostname: "127.6.0.3"}, Services: []*machine.ServiceInfo{
			{Id: "apid", State: "Starting", Health: &machine.ServiceHealth{Unknown: true}},
		}},
		{Metadata: unreachable("127.6.0.4")},
	}}

	var table, status bytes.Buffer

	if err := printReply(&table, formatTable, resp, false, func(w io.Writer) { serviceListTable(w, resp, true, now) }); err != nil {
		t.Fatal(err)
	}

	one := onlyService(proto.Clone(resp).(*machine.ServiceListResponse), "trustd")
	if err := printReply(&status, formatTable, one, false, func(w io.Writer) { serviceStatusTable(w, one, true, now) }); err != nil {
		t.Fatal(err)
	}

	golden.Compare(t, "services.golden", table.Bytes())
	golden.Compare(t, "service-status.golden", status.Bytes())

	if err := failedNodes(one); err == nil || !strings.Contains(err.Error(), "2 of 3 nodes failed: 127.6.0.3, 127.6.0.4") {
		t.Fatalf("a node without the service must count as failed: %v", err)
	}
}

func TestTokenListOutput(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }

	resp := &tokens.ListResponse{Messages: []*tokens.TokenList{{Tokens: []*tokens.Token{
		{Id: "abcdef", Created: ts(-time.Hour), Expires: ts(23 * time.Hour), MaxUses: 1, Description: "one worker"},
		{Id: "ghijkl", Created: ts(-time.Hour), Expires: ts(time.Hour), MaxUses: 2, Uses: 2, AllowedSans: []string{"node-*.example", "10.0.0.0/24"}},
		{Id: "mnopqr", Created: ts(-48 * time.Hour), Expires: ts(-24 * time.Hour)},
		{Id: "stuvwx", Created: ts(-time.Hour), Expires: ts(time.Hour), Uses: 7, Revoked: ts(-time.Minute)},
	}}}}

	for golden_, wide := range map[string]bool{"tokens.golden": false, "tokens-wide.golden": true} {
		var out bytes.Buffer
		if err := printReply(&out, formatTable, resp, false, func(w io.Writer) { tokenListTable(w, resp, false, now, wide) }); err != nil {
			t.Fatal(err)
		}

		golden.Compare(t, golden_, out.Bytes())
	}
}

func TestEtcdMembersWide(t *testing.T) {
	resp := &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{Members: []*machine.EtcdMember{
		{Id: 0x8e9e05c52164694d, Hostname: "cp-1", PeerUrls: []string{"https://127.5.0.2:2380"}, ClientUrls: []string{"https://127.5.0.2:2379"}},
	}}}}

	var out bytes.Buffer
	if err := printReply(&out, formatTable, resp, false, func(w io.Writer) { etcdMembersTable(w, resp, false, true) }); err != nil {
		t.Fatal(err)
	}

	// The hex ID of the table and the decimal one of -o json, side by side.
	if got := out.String(); !strings.Contains(got, "8e9e05c52164694d") || !strings.Contains(got, "10276657743932975437") {
		t.Fatalf("wide table:\n%s", got)
	}

	var f outputFormat
	if err := (formatFlag{f: &f}).Set("wide"); err == nil || !strings.Contains(err.Error(), "no more columns") {
		t.Fatalf("wide on a command without a wide table: %v", err)
	}

	if err := (formatFlag{f: &f, wide: true}).Set("wide"); err != nil || f != formatWide {
		t.Fatalf("wide: %v, %q", err, f)
	}
}

func TestEventOutput(t *testing.T) {
	mk := func(id, actor string, payload proto.Message) *machine.Event {
		ev, err := anyEvent(payload)
		if err != nil {
			t.Fatal(err)
		}

		ev.Id, ev.ActorId, ev.Metadata = id, actor, &common.Metadata{Hostname: "127.6.0.3"}

		return ev
	}

	var out bytes.Buffer

	printEventHeader(&out, true)

	for _, ev := range []*machine.Event{
		mk("1", "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_START}),
		mk("2", "0123456789abcdef0123", &machine.PhaseEvent{Phase: "certificates", Action: machine.PhaseEvent_STOP}),
		mk("3", "", &machine.ServiceStateEvent{Service: "apid", Action: machine.ServiceStateEvent_RUNNING, Message: "process 7 started",
			Health: &machine.ServiceHealth{Healthy: true}}),
		mk("4", "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP, Error: &common.Error{Message: "phase time: no sync"}}),
		mk("5", "", &machine.MachineStatusEvent{Stage: machine.MachineStatusEvent_RUNNING, Status: &machine.MachineStatusEvent_MachineStatus{Ready: true}}),
	} {
		printEvent(&out, true, ev)
	}

	golden.Compare(t, "events.golden", out.Bytes())
}

func TestOutputFlag(t *testing.T) {
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"table", true}, {"json", true}, {"yaml", true}, {"xml", false}, {"", false}} {
		var f outputFormat
		if err := f.Set(tt.value); (err == nil) != tt.ok {
			t.Fatalf("Set(%q) = %v", tt.value, err)
		}
	}
}

// anyEvent wraps payload as machined sends it.
func anyEvent(payload proto.Message) (*machine.Event, error) {
	value, err := proto.Marshal(payload)
	if err != nil {
		return nil, err
	}

	return &machine.Event{Data: &anypb.Any{
		TypeUrl: "talos/runtime/" + string(payload.ProtoReflect().Descriptor().FullName()), Value: value,
	}}, nil
}

func TestRevokeOutput(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	rev := func(serial string, life time.Duration) *revocations.Revocation {
		return &revocations.Revocation{Serial: serial, NotAfter: ts(life), RevokedAt: ts(0), RevokedBy: "O=os:admin, CN=admin", Reason: "laptop lost"}
	}

	for name, descendants := range map[string][]*revocations.Revocation{
		"revoke-alone.golden":   nil,
		"revoke-renewed.golden": {rev("9c01d7e2", 24*time.Hour), rev("a17f", 48*time.Hour)},
	} {
		resp := &revocations.RevokeResponse{Messages: []*revocations.Revoked{{Revocation: rev("5f3a09c2e1d4b7a8", time.Hour), Descendants: descendants}}}

		var out bytes.Buffer
		if err := printReply(&out, formatTable, resp, false, func(w io.Writer) { revokedTable(w, resp, now) }); err != nil {
			t.Fatal(err)
		}

		golden.Compare(t, name, out.Bytes())
	}
}
