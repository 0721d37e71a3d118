// Package upgradetest is a fake cluster for the tests of an upgrade and of
// the command that runs one.
package upgradetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/rollout"
)

// Cluster is a cluster whose members upgrade as a real one's seem to from
// outside: after its Upgrade call a member does not answer for Restarts
// Version calls, then runs Target and is healthy, unless a failure is set
// for it. Set its fields before the upgrade starts; its methods may be
// called from any goroutine.
type Cluster struct {
	mu sync.Mutex

	// List are the members, control planes first.
	List []rollout.Member
	// Versions are the members' versions, by name.
	Versions map[string]string
	// Target is what a member runs after its upgrade.
	Target string
	// Restarts is how many Version calls fail after an Upgrade call.
	Restarts int

	// ListErr fails Members.
	ListErr error
	// Down, Unhealthy, FailDeliver and FailUpgrade fail the call of their
	// name on a member, by name.
	Down, Unhealthy, FailDeliver, FailUpgrade map[string]error
	// Stuck members never switch to Target.
	Stuck map[string]bool
	// GoesBack members go back after their Upgrade call: they run the
	// rollback's To again and report the rollback.
	GoesBack map[string]resourcetypes.UpgradeRollback
	// Rollbacks are the last rollbacks the members report, by name.
	Rollbacks map[string]resourcetypes.UpgradeRollback
	// NoStatus fails LastRollback on a member, by name, as on a member of
	// a version that does not serve its upgrade status.
	NoStatus map[string]error

	restarting map[string]int
	upgraded   map[string]bool
	healthy    map[string]bool
	log        []string
}

// New is a cluster of controlPlanes control planes (cp-1 at 10.0.0.2, …)
// and workers workers (w-1 at 10.0.1.2, …), each on from.
func New(controlPlanes, workers int, from, target string) *Cluster {
	c := &Cluster{Versions: map[string]string{}, Target: target, Restarts: 2,
		Down: map[string]error{}, Unhealthy: map[string]error{}, FailDeliver: map[string]error{}, FailUpgrade: map[string]error{},
		Stuck: map[string]bool{}, GoesBack: map[string]resourcetypes.UpgradeRollback{}, Rollbacks: map[string]resourcetypes.UpgradeRollback{}, NoStatus: map[string]error{},
		restarting: map[string]int{}, upgraded: map[string]bool{}, healthy: map[string]bool{}}

	for i := range controlPlanes {
		c.add(fmt.Sprintf("cp-%d", i+1), fmt.Sprintf("10.0.0.%d", i+2), "controlplane", from)
	}

	for i := range workers {
		c.add(fmt.Sprintf("w-%d", i+1), fmt.Sprintf("10.0.1.%d", i+2), "worker", from)
	}

	return c
}

func (c *Cluster) add(name, addr, role, version string) {
	c.List = append(c.List, rollout.Member{Name: name, Addr: addr, Addrs: []string{addr}, Role: role})
	c.Versions[name] = version
}

// Members returns List, or ListErr.
func (c *Cluster) Members(context.Context) ([]rollout.Member, error) {
	return c.List, c.ListErr
}

// Version is m's version, unless m is down or restarting.
func (c *Cluster) Version(_ context.Context, m rollout.Member) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if err := c.Down[m.Name]; err != nil {
		return "", err
	}

	if c.restarting[m.Name] > 0 {
		c.restarting[m.Name]--

		return "", errors.New("connection refused")
	}

	return c.Versions[m.Name], nil
}

// Healthy is nil unless Unhealthy names m; the first time an upgraded
// member on Target is, the log says "ok NAME".
func (c *Cluster) Healthy(_ context.Context, m rollout.Member) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if err := c.Unhealthy[m.Name]; err != nil {
		return err
	}

	if c.upgraded[m.Name] && !c.healthy[m.Name] && c.Versions[m.Name] == c.Target {
		c.healthy[m.Name] = true
		c.log = append(c.log, "ok "+m.Name)
	}

	return nil
}

// Deliver logs "deliver NAME" and returns the reference "NAME:PATH".
func (c *Cluster) Deliver(_ context.Context, m rollout.Member, path string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.log = append(c.log, "deliver "+m.Name)

	if err := c.FailDeliver[m.Name]; err != nil {
		return "", err
	}

	return m.Name + ":" + path, nil
}

// Upgrade logs "upgrade NAME" and, unless it fails or m is stuck, moves m
// to Target after its restart. A reference Deliver did not give m fails.
func (c *Cluster) Upgrade(_ context.Context, m rollout.Member, ref string) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.log = append(c.log, "upgrade "+m.Name)

	if !strings.HasPrefix(ref, m.Name+":") {
		return fmt.Errorf("upgrade of %s names %q, which it was not given", m.Name, ref)
	}

	if err := c.FailUpgrade[m.Name]; err != nil {
		return err
	}

	c.upgraded[m.Name] = true
	c.restarting[m.Name] = c.Restarts

	switch r, back := c.GoesBack[m.Name]; {
	case back:
		c.Rollbacks[m.Name], c.Versions[m.Name] = r, r.To
	case !c.Stuck[m.Name]:
		c.Versions[m.Name] = c.Target
	}

	return nil
}

// LastRollback is m's entry in Rollbacks (zero when none), unless NoStatus
// names m; every call is logged "status NAME".
func (c *Cluster) LastRollback(_ context.Context, m rollout.Member) (resourcetypes.UpgradeRollback, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.log = append(c.log, "status "+m.Name)

	if err := c.NoStatus[m.Name]; err != nil {
		return resourcetypes.UpgradeRollback{}, err
	}

	return c.Rollbacks[m.Name], nil
}

// Changes are the calls that changed something ("deliver NAME", "upgrade
// NAME"), in order.
func (c *Cluster) Changes() []string { return c.Log("deliver", "upgrade") }

// Log is the log of the calls of the kinds ("deliver", "upgrade", "ok",
// "status"),
// in order.
func (c *Cluster) Log(kinds ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	var out []string

	for _, l := range c.log {
		for _, k := range kinds {
			if strings.HasPrefix(l, k+" ") {
				out = append(out, l)
			}
		}
	}

	return out
}
