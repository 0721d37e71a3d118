package node

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/resources"
)

// TestPublishMembers: apid receives each member's hostname with its first
// address, and the names of a later list replace the earlier ones.
func TestPublishMembers(t *testing.T) {
	st, err := resourceapi.New()
	if err != nil {
		t.Fatal(err)
	}

	n := &heartbeats{deps: deps{store: resources.NewStore(), res: st, log: slog.New(slog.DiscardHandler)}}

	n.publishMembers([]*membership.Member{
		{Hostname: "cp-1", Addresses: []string{"10.0.0.1"}},
		{Hostname: "worker-1", Addresses: []string{"10.0.0.5", "fd00::5"}},
	})
	n.publishMembers([]*membership.Member{{Hostname: "worker-1", Addresses: []string{"10.0.0.5", "fd00::5"}}})

	res, _ := n.store.Current()
	apid := resources.APIDView(res)

	if got := apid.GetMembers(); len(got) != 1 || got[0].GetHostname() != "worker-1" || got[0].GetAddress() != "10.0.0.5" {
		t.Fatalf("apid's members = %v", got)
	}

	if trustd := resources.TrustdView(res); len(trustd.GetMembers()) != 0 {
		t.Fatalf("trustd sees the members: %v", trustd.GetMembers())
	}
}

func TestCanonicalAddresses(t *testing.T) {
	got := canonicalAddresses([]string{"::ffff:10.0.0.1", "FD00::0001", "not an address", "10.0.0.2"})
	if want := []string{"10.0.0.1", "fd00::1", "10.0.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("canonicalAddresses = %v, want %v", got, want)
	}
}
