package main

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"text/tabwriter"
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
		// Held by its connection: last_seen is rewritten only now and then.
		{Hostname: "worker-2", Addresses: []string{"10.0.0.6"}, Role: "worker", Version: "v1.2.0", LastSeen: seen(20 * time.Minute), TimeSynced: true, Held: true},
	}}}}

	for _, f := range []outputFormat{formatTable, formatJSON} {
		var out bytes.Buffer
		if err := printReply(&out, f, resp, false, func(w io.Writer) { membersTable(w, resp, false, now) }); err != nil {
			t.Fatal(err)
		}

		golden.Compare(t, "members."+string(f)+".golden", out.Bytes())
	}
}

// writeCounter counts the writes made to it, as a terminal or a pipe
// would count system calls.
type writeCounter struct {
	bytes.Buffer

	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++

	return w.Buffer.Write(p)
}

// TestLargeTableWritesInBulk prints the members table of a large cluster
// and checks that it reaches its output in a few large writes, aligned as
// the tabwriter aligns it: written cell by cell, 10,000 members took some
// 120,000 writes, each a system call on a terminal or a pipe.
func TestLargeTableWritesInBulk(t *testing.T) {
	const n = 10_000

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	members := make([]*membership.Member, n)

	for i := range members {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)
		members[i] = &membership.Member{Hostname: "worker-" + addr, Addresses: []string{addr}, Role: "worker", Version: "v1.2.0",
			LastSeen: timestamppb.New(now.Add(-time.Duration(i%30) * time.Second)), TimeSynced: i%7 != 0}
	}

	resp := &membership.ListResponse{Messages: []*membership.Members{{Members: members}}}

	var out writeCounter
	if err := printReply(&out, formatTable, resp, false, func(w io.Writer) { membersTable(w, resp, false, now) }); err != nil {
		t.Fatal(err)
	}

	var want bytes.Buffer

	tw := tabwriter.NewWriter(&want, 0, 4, 3, ' ', 0)
	membersTable(tw, resp, false, now)
	_ = tw.Flush()

	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatalf("the table differs from the tabwriter's own alignment:\n%.400s\nwant:\n%.400s", out.String(), want.String())
	}

	if limit := out.Len()/tableBuffer + 1; out.writes > limit {
		t.Errorf("%d members reached the output in %d writes (%d bytes), want at most %d", n, out.writes, out.Len(), limit)
	}
}
