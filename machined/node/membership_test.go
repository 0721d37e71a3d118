package node

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"

	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/resources"
)

// TestPublishMembers: apid receives each member's hostname with its first
// address, and a member that left leaves its list; trustd sees none.
func TestPublishMembers(t *testing.T) {
	st, err := resourceapi.New()
	if err != nil {
		t.Fatal(err)
	}

	n := &heartbeats{deps: deps{store: resources.NewStore(), members: resources.NewMembers(), res: st, log: slog.New(slog.DiscardHandler)}}

	n.publishMembers([]membership.Change{
		{Address: "10.0.0.1", Member: &membership.Member{Hostname: "cp-1", Addresses: []string{"10.0.0.1"}}},
		{Address: "10.0.0.5", Member: &membership.Member{Hostname: "worker-1", Addresses: []string{"10.0.0.5", "fd00::5"}}},
	})
	n.publishMembers([]membership.Change{{Address: "10.0.0.1"}})

	if got := n.members.List(); len(got) != 1 || got[0].GetHostname() != "worker-1" || got[0].GetAddress() != "10.0.0.5" {
		t.Fatalf("apid's members = %v", got)
	}

	list, err := safe.StateListAll[*cluster.Member](context.Background(), st.Reader())
	if err != nil || list.Len() != 1 || list.Get(0).Metadata().ID() != "worker-1" {
		t.Fatalf("the resource API's members = %v, %v; want worker-1 alone", list, err)
	}
}

func TestCanonicalAddresses(t *testing.T) {
	got := canonicalAddresses([]string{"::ffff:10.0.0.1", "FD00::0001", "not an address", "10.0.0.2"})
	if want := []string{"10.0.0.1", "fd00::1", "10.0.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("canonicalAddresses = %v, want %v", got, want)
	}
}
