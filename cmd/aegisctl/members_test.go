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

func TestMembersOutput(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	seen := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }

	resp := &membership.ListResponse{Messages: []*membership.Members{{Members: []*membership.Member{
		{Hostname: "cp-1", Addresses: []string{"10.0.0.1"}, Role: "controlplane", Version: "v1.2.0", LastSeen: seen(3 * time.Second), TimeSynced: true},
		{Hostname: "worker-1", Addresses: []string{"10.0.0.5", "fd00::5"}, Role: "worker", Version: "v1.2.0", LastSeen: seen(12 * time.Second)},
	}}}}

	for _, f := range []outputFormat{formatTable, formatJSON} {
		var out bytes.Buffer
		if err := printReply(&out, f, resp, false, func(w io.Writer) { membersTable(w, resp, false, now) }); err != nil {
			t.Fatal(err)
		}

		golden.Compare(t, "members."+string(f)+".golden", out.Bytes())
	}
}
