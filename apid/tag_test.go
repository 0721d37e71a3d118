package apid

import (
	"errors"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()

	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}

	return b
}

func TestTagUnaryReplies(t *testing.T) {
	tests := []struct {
		name string
		in   *machine.ServiceListResponse
		want int // messages after tagging
	}{
		{"one message", &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Services: []*machine.ServiceInfo{{Id: "apid"}}}}}, 1},
		{"machined's own hostname is overridden", &machine.ServiceListResponse{Messages: []*machine.ServiceList{{Metadata: &common.Metadata{Hostname: "cp-1"}}}}, 1},
		{"two messages", &machine.ServiceListResponse{Messages: []*machine.ServiceList{{}, {Services: []*machine.ServiceInfo{{Id: "x"}}}}}, 2},
		{"no message", &machine.ServiceListResponse{}, 1},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newTag("10.0.0.7").reply(mustMarshal(t, tt.in), false)
			if err != nil {
				t.Fatal(err)
			}

			var got machine.ServiceListResponse
			if err := proto.Unmarshal(out, &got); err != nil {
				t.Fatalf("tagged reply does not decode: %v", err)
			}

			if len(got.Messages) != tt.want {
				t.Fatalf("%d messages, want %d", len(got.Messages), tt.want)
			}

			for i, m := range got.Messages {
				if m.GetMetadata().GetHostname() != "10.0.0.7" {
					t.Errorf("message %d: hostname %q", i, m.GetMetadata().GetHostname())
				}

				if i < len(tt.in.Messages) && len(m.Services) != len(tt.in.Messages[i].Services) {
					t.Errorf("message %d lost its services", i)
				}
			}
		})
	}
}

func TestTagKeepsOtherFields(t *testing.T) {
	in := mustMarshal(t, &machine.VersionResponse{Messages: []*machine.Version{{Version: &machine.VersionInfo{Tag: "v1"}}}})
	in = protowire.AppendTag(in, 99, protowire.VarintType)
	in = protowire.AppendVarint(in, 42)

	out, err := newTag("n").reply(in, false)
	if err != nil {
		t.Fatal(err)
	}

	var got machine.VersionResponse
	if err := proto.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}

	if got.Messages[0].GetVersion().GetTag() != "v1" || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("fields lost: %v", &got)
	}
}

func TestTagRefusesOtherShapes(t *testing.T) {
	for name, in := range map[string][]byte{
		"field 1 varint": protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5),
		"truncated":      {0x0a, 0x05, 0x01},
		"bad tag":        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := newTag("n").reply(in, false); !errors.Is(err, errNotTalosReply) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestTagStreamedMessage(t *testing.T) {
	in := mustMarshal(t, &common.Data{Metadata: &common.Metadata{Hostname: "machined"}, Bytes: []byte("line\n")})

	out, err := newTag("10.0.0.7").reply(in, true)
	if err != nil {
		t.Fatal(err)
	}

	var got common.Data
	if err := proto.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}

	if got.GetMetadata().GetHostname() != "10.0.0.7" || string(got.GetBytes()) != "line\n" {
		t.Fatalf("got %v", &got)
	}
}

func TestFailureEntries(t *testing.T) {
	st := status.New(codes.Unavailable, "connection refused")
	tg := newTag("10.0.0.9")

	var unary machine.VersionResponse
	if err := proto.Unmarshal(tg.failure(st, false), &unary); err != nil {
		t.Fatal(err)
	}

	if len(unary.Messages) != 1 {
		t.Fatalf("unary failure: %v", &unary)
	}

	md := unary.Messages[0].GetMetadata()
	if md.GetHostname() != "10.0.0.9" || md.GetStatus().GetCode() != int32(codes.Unavailable) || md.GetError() == "" { //nolint:staticcheck
		t.Fatalf("metadata %v", md)
	}

	var ev machine.Event
	if err := proto.Unmarshal(tg.failure(st, true), &ev); err != nil {
		t.Fatal(err)
	}

	if ev.GetMetadata().GetStatus().GetMessage() != "connection refused" {
		t.Fatalf("streamed failure %v", &ev)
	}
}

func TestMergedRepliesConcatenate(t *testing.T) {
	a, _ := newTag("a").reply(mustMarshal(t, &machine.HostnameResponse{Messages: []*machine.Hostname{{Hostname: "A"}}}), false)
	b := newTag("b").failure(status.New(codes.DeadlineExceeded, "slow"), false)

	var got machine.HostnameResponse
	if err := proto.Unmarshal(append(a, b...), &got); err != nil {
		t.Fatal(err)
	}

	if len(got.Messages) != 2 || got.Messages[0].GetHostname() != "A" || got.Messages[1].GetMetadata().GetHostname() != "b" {
		t.Fatalf("merged %v", &got)
	}
}
