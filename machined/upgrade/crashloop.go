package upgrade

import (
	"fmt"
	"time"
)

// CrashLoop tells a version on trial that cannot start one of its
// services from one that is still starting: it counts, per service, the
// exits in a row without the service coming up in between. A service
// that can run comes up at its first or second try; its restart delays
// grow from a second, so a service that exited CrashLoopExits times in a
// row has had its chances within seconds, and waiting for the rest of the
// trial would only keep the node down longer.
type CrashLoop struct {
	exits map[string]int
}

// Exited records an exit of service and returns the reason to go back
// once it has exited CrashLoopExits times in a row, else "".
func (c *CrashLoop) Exited(version, service, message string) string {
	if c.exits == nil {
		c.exits = map[string]int{}
	}

	c.exits[service]++
	if c.exits[service] < CrashLoopExits {
		return ""
	}

	return fmt.Sprintf("%s: service %s exited %d times in a row without coming up (last: %s)",
		version, service, c.exits[service], message)
}

// Up records that service came up (running, and healthy when it has a
// check): its count starts again.
func (c *CrashLoop) Up(service string) { delete(c.exits, service) }

// GiveUp ends the trial of the active version before its deadline, for
// reason, at now: the version goes back to the kept one, as at the
// deadline.
func GiveUp(s State, now time.Time, reason string) (State, bool) {
	if s.Trial == nil {
		return s, false
	}

	rolled, err := autoRollBack(s, now, reason)
	if err != nil {
		return s, false
	}

	return rolled, true
}
