package trustd

import (
	"sync"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

// changingHosts is a ControlPlanes whose list a test changes.
type changingHosts struct {
	mu    sync.Mutex
	hosts []string
}

func (c *changingHosts) ControlPlaneHosts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	return append([]string(nil), c.hosts...)
}

func (c *changingHosts) set(hosts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.hosts = hosts
}

// TestReservedFollowsControlPlanes: the reserved set is kept between
// requests, and rebuilt as soon as the control planes change.
func TestReservedFollowsControlPlanes(t *testing.T) {
	cps := &changingHosts{hosts: []string{"cp-1"}}
	s := &Server{cfg: Config{Certificate: &certs.KeyPair{}, ControlPlanes: cps}}

	first := s.reserved()
	if _, ok := first.Find("cp-1", nil, nil); !ok {
		t.Fatal("cp-1 not reserved")
	}

	if again := s.reserved(); again != first {
		t.Error("set rebuilt though nothing changed")
	}

	cps.set("cp-1", "cp-2")

	if _, ok := s.reserved().Find("", []string{"cp-2"}, nil); !ok {
		t.Fatal("cp-2 not reserved after the control planes changed")
	}

	cps.set("cp-2")

	if _, ok := s.reserved().Find("cp-1", nil, nil); ok {
		t.Fatal("cp-1 still reserved after it left the control planes")
	}
}
