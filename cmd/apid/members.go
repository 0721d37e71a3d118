package main

import (
	"sync/atomic"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/client/routing"
)

// memberNames are the cluster's live members (hostname, address, proven
// role) as machined last published them; apid routes a member's hostname
// or address to it.
type memberNames struct {
	list atomic.Pointer[memberList]
}

type memberList struct {
	byName, byAddr map[string]apid.Member
}

// set replaces the members. An entry whose name or address is not
// canonical is left out: it could not be routed to anyway. A name or an
// address two entries claim is left out too: apid does not guess which
// node the caller meant.
func (m *memberNames) set(members []*node.MemberName) {
	l := &memberList{byName: map[string]apid.Member{}, byAddr: map[string]apid.Member{}}
	dupName, dupAddr := map[string]bool{}, map[string]bool{}

	for _, mn := range members {
		name, err := routing.Canonical(mn.GetHostname())
		if err != nil {
			continue
		}

		addr, err := routing.Canonical(mn.GetAddress())
		if err != nil || addr != mn.GetAddress() {
			continue
		}

		mb := apid.Member{Hostname: name, Address: addr, Role: provenRole(mn.GetRole())}

		if _, ok := l.byName[name]; ok {
			dupName[name] = true
		}

		if _, ok := l.byAddr[addr]; ok {
			dupAddr[addr] = true
		}

		l.byName[name], l.byAddr[addr] = mb, mb
	}

	for name := range dupName {
		delete(l.byName, name)
	}

	for addr := range dupAddr {
		delete(l.byAddr, addr)
	}

	m.list.Store(l)
}

// provenRole keeps the roles apid knows; anything else proves none.
func provenRole(r string) string {
	if r == apid.RoleControlPlane || r == apid.RoleWorker {
		return r
	}

	return ""
}

// MemberByName is the member named name.
func (m *memberNames) MemberByName(name string) (apid.Member, bool) {
	l := m.list.Load()
	if l == nil {
		return apid.Member{}, false
	}

	mb, ok := l.byName[name]

	return mb, ok
}

// MemberByAddress is the member at addr.
func (m *memberNames) MemberByAddress(addr string) (apid.Member, bool) {
	l := m.list.Load()
	if l == nil {
		return apid.Member{}, false
	}

	mb, ok := l.byAddr[addr]

	return mb, ok
}
