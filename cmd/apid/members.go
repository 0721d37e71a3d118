package main

import (
	"sync"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/client/routing"
)

// memberNames are the cluster's live members (hostname, address, proven
// role) as machined publishes them; apid routes a member's hostname or
// address to it. machined sends the list once, then each member that
// came, changed or left, so that a change costs apid that member alone.
type memberNames struct {
	mu sync.RWMutex
	// byAddr are the routable members by address; byName the addresses
	// of the members that claim each name.
	byAddr map[string]apid.Member
	byName map[string][]string
}

// apply takes one message of machined's member list: the whole list when
// Full, else the members set (by address) and those that left. An entry
// whose name or address is not canonical is left out: it could not be
// routed to anyway. A name two entries claim names neither: apid does not
// guess which node the caller meant.
func (m *memberNames) apply(c *node.MemberChanges) error {
	m.mu.Lock()
	defer m.mu.Unlock()

	if c.GetFull() || m.byAddr == nil {
		m.byAddr, m.byName = map[string]apid.Member{}, map[string][]string{}
	}

	for _, addr := range c.GetRemoved() {
		m.remove(addr)
	}

	for _, mn := range c.GetSet() {
		m.remove(mn.GetAddress())

		name, err := routing.Canonical(mn.GetHostname())
		if err != nil {
			continue
		}

		addr, err := routing.Canonical(mn.GetAddress())
		if err != nil || addr != mn.GetAddress() {
			continue
		}

		m.byAddr[addr] = apid.Member{Hostname: name, Address: addr, Role: provenRole(mn.GetRole())}
		m.byName[name] = append(m.byName[name], addr)
	}

	return nil
}

// remove takes out the member at addr, if any.
func (m *memberNames) remove(addr string) {
	mb, ok := m.byAddr[addr]
	if !ok {
		return
	}

	delete(m.byAddr, addr)

	rest := m.byName[mb.Hostname][:0]
	for _, a := range m.byName[mb.Hostname] {
		if a != addr {
			rest = append(rest, a)
		}
	}

	if len(rest) == 0 {
		delete(m.byName, mb.Hostname)
	} else {
		m.byName[mb.Hostname] = rest
	}
}

// provenRole keeps the roles apid knows; anything else proves none.
func provenRole(r string) string {
	if r == apid.RoleControlPlane || r == apid.RoleWorker {
		return r
	}

	return ""
}

// MemberByName is the member named name, unless two entries claim it.
func (m *memberNames) MemberByName(name string) (apid.Member, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()

	if addrs := m.byName[name]; len(addrs) == 1 {
		return m.byAddr[addrs[0]], true
	}

	return apid.Member{}, false
}

// MemberByAddress is the member at addr.
func (m *memberNames) MemberByAddress(addr string) (apid.Member, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()

	mb, ok := m.byAddr[addr]

	return mb, ok
}
