package main

import (
	"sync/atomic"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/apid"
)

// memberNames are the cluster members' hostnames and addresses, as
// machined last published them; apid routes a member's hostname to its
// address.
type memberNames struct {
	byName atomic.Pointer[map[string]string]
}

// set replaces the names. An entry whose name or address is not canonical
// is left out: it could not be routed to anyway.
func (m *memberNames) set(members []*node.MemberName) {
	byName := map[string]string{}

	for _, mn := range members {
		name, err := apid.CanonicalNode(mn.GetHostname())
		if err != nil {
			continue
		}

		addr, err := apid.CanonicalNode(mn.GetAddress())
		if err != nil || addr != mn.GetAddress() {
			continue
		}

		byName[name] = addr
	}

	m.byName.Store(&byName)
}

// MemberAddress is the address of the member named name.
func (m *memberNames) MemberAddress(name string) (string, bool) {
	byName := m.byName.Load()
	if byName == nil {
		return "", false
	}

	addr, ok := (*byName)[name]

	return addr, ok
}
