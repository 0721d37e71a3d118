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

	m.apply(&node.MemberChanges{Full: true, Set: []*node.MemberName{
		{Hostname: "cp-1", Address: "10.0.0.1", Role: "controlplane"},
		{Hostname: "Worker-1.", Address: "10.0.0.2", Role: "worker"},
		{Hostname: "twin", Address: "10.0.0.3", Role: "worker"},
		{Hostname: "twin", Address: "10.0.0.4", Role: "worker"},
		{Hostname: "odd", Address: "10.0.0.5", Role: "root"},
		{Hostname: "mapped", Address: "::ffff:10.0.0.6", Role: "worker"},
	}})

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

// TestMemberNamesChanges: members that come, change or leave change the
// index as the whole list would; a name claimed twice names its member
// again once the other leaves; a full list replaces everything.
func TestMemberNamesChanges(t *testing.T) {
	var m memberNames

	steps := []struct {
		changes *node.MemberChanges
		names   map[string]string // name -> address, "" for none
	}{
		{&node.MemberChanges{Full: true, Set: []*node.MemberName{
			{Hostname: "w-1", Address: "10.0.0.2", Role: "worker"},
			{Hostname: "twin", Address: "10.0.0.3", Role: "worker"},
			{Hostname: "twin", Address: "10.0.0.4", Role: "worker"},
		}}, map[string]string{"w-1": "10.0.0.2", "twin": ""}},
		// 10.0.0.4 renamed: twin is 10.0.0.3's alone.
		{&node.MemberChanges{Set: []*node.MemberName{{Hostname: "w-4", Address: "10.0.0.4", Role: "worker"}}},
			map[string]string{"twin": "10.0.0.3", "w-4": "10.0.0.4"}},
		// w-1 leaves; an address not held leaves nothing behind.
		{&node.MemberChanges{Removed: []string{"10.0.0.2", "10.0.0.9"}},
			map[string]string{"w-1": "", "twin": "10.0.0.3"}},
		// a member at an address apid cannot route to is left out, and
		// takes nothing from the member of the canonical address.
		{&node.MemberChanges{Set: []*node.MemberName{{Hostname: "w-5", Address: "::ffff:10.0.0.4", Role: "worker"}}},
			map[string]string{"w-4": "10.0.0.4", "w-5": ""}},
		{&node.MemberChanges{Full: true, Set: []*node.MemberName{{Hostname: "cp-1", Address: "10.0.0.1", Role: "controlplane"}}},
			map[string]string{"cp-1": "10.0.0.1", "twin": "", "w-4": ""}},
	}

	for i, step := range steps {
		if err := m.apply(step.changes); err != nil {
			t.Fatal(err)
		}

		for name, addr := range step.names {
			got, ok := m.MemberByName(name)

			switch {
			case addr == "" && ok:
				t.Errorf("step %d: MemberByName(%q) = %+v, want none", i, name, got)
			case addr != "" && (!ok || got.Address != addr):
				t.Errorf("step %d: MemberByName(%q) = %+v, %v; want address %s", i, name, got, ok, addr)
			}
		}
	}

	if _, ok := m.MemberByAddress("10.0.0.4"); ok {
		t.Error("a member the full list left out is still found by its address")
	}
}
