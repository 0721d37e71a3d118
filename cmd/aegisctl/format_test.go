package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()

	path := filepath.Join("testdata", name)

	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}

		return
	}

	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}

	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

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

			golden(t, tt.name, out.Bytes())
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
