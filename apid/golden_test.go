package apid

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/testutil/golden"
)

// TestMergedReplyGolden pins the wire form of a merged fan-out reply: two
// nodes' Version replies (one with machined's own metadata) and a failed
// node's entry, as bytes and as a Talos client decodes them.
func TestMergedReplyGolden(t *testing.T) {
	marshal := proto.MarshalOptions{Deterministic: true}

	reply := func(host, tag string) []byte {
		b, err := marshal.Marshal(&machine.VersionResponse{Messages: []*machine.Version{{
			Metadata: &common.Metadata{Hostname: host},
			Version:  &machine.VersionInfo{Tag: tag},
		}}})
		if err != nil {
			t.Fatal(err)
		}

		return b
	}

	a, err := newTag("10.0.0.1").reply(reply("cp-1", "v1.13.9"), false)
	if err != nil {
		t.Fatal(err)
	}

	b, err := newTag("10.0.0.2").reply(reply("", "v1.13.9"), false)
	if err != nil {
		t.Fatal(err)
	}

	failed := newTag("10.0.0.3").failure(status.New(codes.Unavailable, "connection refused"), false)
	merged := append(append(a, b...), failed...)

	var decoded machine.VersionResponse
	if err := proto.Unmarshal(merged, &decoded); err != nil {
		t.Fatal(err)
	}

	text, err := prototext.MarshalOptions{Multiline: true}.Marshal(&decoded)
	if err != nil {
		t.Fatal(err)
	}

	// prototext randomizes its spacing between builds; the golden file
	// holds the text without any.
	got := hex.EncodeToString(merged) + "\n\n" + strings.Join(strings.Fields(string(text)), "") + "\n"
	golden.Compare(t, "merged_version.golden", []byte(got))
}
