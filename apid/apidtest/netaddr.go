package apidtest

import (
	"net"

	"github.com/aegis-os/aegis/apid"
	"net/netip"
	"strconv"
	"sync"
	"testing"
)

// maxAddrTries bounds the addresses Listen tries before giving up: enough
// to step over a few taken by other processes.
const maxAddrTries = 64

// nodeNet gives the nodes of one PKI's cluster distinct loopback addresses
// on one port, as real nodes have distinct addresses on the API port:
// routing targets carry no port, so nodes are told apart by address.
type nodeNet struct {
	mu   sync.Mutex
	port int
	used map[netip.Addr]bool
}

// NodePort returns the port every node of the PKI's cluster listens on;
// zero before the first Listen.
func (p *PKI) NodePort() int {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()

	return p.net.port
}

// Listen opens a listener on the cluster's port at ip, or at the next
// address after it if ip is taken (by another node of the cluster or by
// anything else), and returns it with the address it took. The first
// Listen of a PKI picks the port.
func (p *PKI) Listen(tb testing.TB, ip string) (net.Listener, string) {
	tb.Helper()

	addr, err := netip.ParseAddr(ip)
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}

	p.net.mu.Lock()
	defer p.net.mu.Unlock()

	if p.net.used == nil {
		p.net.used = map[netip.Addr]bool{}
	}

	for range maxAddrTries {
		if !p.net.used[addr] {
			lis, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(p.net.port)))
			if err == nil {
				p.net.used[addr] = true
				if p.net.port == 0 {
					p.net.port = lis.Addr().(*net.TCPAddr).Port
				}

				return lis, addr.String()
			}
		}

		addr = addr.Next()
	}

	tb.Fatalf("listen: no free address from %s on port %d", ip, p.net.port)

	return nil, ""
}

// DeadNode returns an address, at ip or after it, where nothing listens on
// the cluster's port: a node that is down, still a live member (its entry
// has not aged out yet).
func (p *PKI) DeadNode(tb testing.TB, ip string) string {
	tb.Helper()

	lis, addr := p.Listen(tb, ip)
	lis.Close()

	p.AddMember(addr, addr, apid.RoleControlPlane)

	return addr
}
