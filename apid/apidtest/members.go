package apidtest

import (
	"sync"

	"github.com/aegis-os/aegis/apid"
)

// members is the live member list of a PKI's cluster: every node started
// on the PKI, and every dead node, is a member, as in a real cluster
// where apid routes only to members.
type members struct {
	mu     sync.Mutex
	byAddr map[string]apid.Member
}

// AddMember records a membership entry, as a cluster's member list would
// hold it: hostname (canonical), address and role (apid.RoleControlPlane
// or apid.RoleWorker). An entry for the same address replaces the last.
func (p *PKI) AddMember(hostname, addr, role string) {
	p.members.mu.Lock()
	defer p.members.mu.Unlock()

	if p.members.byAddr == nil {
		p.members.byAddr = map[string]apid.Member{}
	}

	p.members.byAddr[addr] = apid.Member{Hostname: hostname, Address: addr, Role: role}
}

// Members returns the cluster's member list as apid reads it.
func (p *PKI) Members() apid.MemberResolver { return &p.members }

// MemberByName finds the member whose hostname is name.
func (m *members) MemberByName(name string) (apid.Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()

	for _, mb := range m.byAddr {
		if mb.Hostname == name {
			return mb, true
		}
	}

	return apid.Member{}, false
}

// MemberByAddress finds the member at addr.
func (m *members) MemberByAddress(addr string) (apid.Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()

	mb, ok := m.byAddr[addr]

	return mb, ok
}
