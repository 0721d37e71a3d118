package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/internal/testutil/golden"
)

func TestMembersCertifiedOutput(t *testing.T) {
	resp := &membership.CertifiedResponse{Messages: []*membership.CertifiedNodes{{Nodes: []*membership.CertifiedNode{
		{Hostname: "cp-1", Addresses: []string{"10.0.0.1"}, Role: "controlplane"},
		{Hostname: "worker-1", Addresses: []string{"10.0.0.5", "fd00::5"}, Role: "worker", NotAfter: timestamppb.New(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))},
	}}}}

	var out bytes.Buffer
	if err := printReply(&out, formatTable, resp, false, func(w io.Writer) { certifiedTable(w, resp, false) }); err != nil {
		t.Fatal(err)
	}

	golden.Compare(t, "members-certified.golden", out.Bytes())
}

func TestMembersRemoveOutput(t *testing.T) {
	resp := &membership.RemoveResponse{Messages: []*membership.Removed{
		{Hostname: "worker-2", Addresses: []string{"10.0.0.6"}, EntryDeleted: true, NameReleased: true},
		{Hostname: "worker-3", Addresses: []string{"10.0.0.7", "fd00::7"}, NameReleased: true},
	}}

	var out bytes.Buffer
	if err := printReply(&out, formatTable, resp, true, func(w io.Writer) { removedTable(w, resp) }); err != nil {
		t.Fatal(err)
	}

	golden.Compare(t, "members-remove.golden", out.Bytes())
}
