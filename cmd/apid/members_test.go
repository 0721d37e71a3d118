package main

import (
	"testing"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/apid"
)

// TestMemberNames: members are found by hostname and by address with the
// role their entry proves; a name or an address two entries claim, and a
// role apid does not know, prove nothing.
func TestMemberNames(t *testing.T) {
	var m memberNames

	m.set([]*node.MemberName{
		{Hostname: "cp-1", Address: "10.0.0.1", Role: "controlplane"},
		{Hostname: "Worker-1.", Address: "10.0.0.2", Role: "worker"},
		{Hostname: "twin", Address: "10.0.0.3", Role: "worker"},
		{Hostname: "twin", Address: "10.0.0.4", Role: "worker"},
		{Hostname: "odd", Address: "10.0.0.5", Role: "root"},
		{Hostname: "mapped", Address: "::ffff:10.0.0.6", Role: "worker"},
	})

	for name, want := range map[string]apid.Member{
		"cp-1":     {Hostname: "cp-1", Address: "10.0.0.1", Role: apid.RoleControlPlane},
		"worker-1": {Hostname: "worker-1", Address: "10.0.0.2", Role: apid.RoleWorker},
		"odd":      {Hostname: "odd", Address: "10.0.0.5"},
	} {
		if got, ok := m.MemberByName(name); !ok || got != want {
			t.Errorf("MemberByName(%q) = %+v, %v; want %+v", name, got, ok, want)
		}

		if got, ok := m.MemberByAddress(want.Address); !ok || got != want {
			t.Errorf("MemberByAddress(%q) = %+v, %v; want %+v", want.Address, got, ok, want)
		}
	}

	for _, name := range []string{"twin", "mapped"} {
		if got, ok := m.MemberByName(name); ok {
			t.Errorf("MemberByName(%q) = %+v, want none", name, got)
		}
	}

	for _, addr := range []string{"10.0.0.3", "10.0.0.4"} {
		if _, ok := m.MemberByAddress(addr); !ok {
			t.Errorf("MemberByAddress(%q): an address held once is a member", addr)
		}
	}
}
