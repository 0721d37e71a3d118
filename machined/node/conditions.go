package node

import (
	"context"
	"log/slog"
	"strings"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/timesync"
)

// timeSynced is the condition "time synced": it holds once the boot's time
// service opens its gate. While it waits it says so in the log, at once and
// then every timeWaitReminder, and reports itself as the machine's unmet
// "time" condition.
type timeSynced struct {
	svc     *timesync.Service
	servers []string
	// before says what waits, for the log: "issuing node certificates".
	before string
	clock  clock.Clock
	log    *slog.Logger
	// unmet reports the wait as the machine's unmet condition (reason
	// set) and its end (reason empty).
	unmet func(reason string)
}

// String names the condition for the Waiting state of the services that
// wait on it.
func (c *timeSynced) String() string {
	if len(c.servers) == 0 {
		return "time sync"
	}

	return "time sync with NTP servers " + strings.Join(c.servers, ", ")
}

// Wait returns once the clock is synced, or ctx's error.
func (c *timeSynced) Wait(ctx context.Context) error {
	if c.svc.Synced() {
		return nil
	}

	c.unmet("waiting for " + c.String())
	defer c.unmet("")

	// The first line is Info: at every boot the first NTP reply may take
	// a moment. The reminders are warnings: by then it is an outage.
	level := slog.LevelInfo

	for {
		changed := c.svc.Changed()
		if c.svc.Synced() {
			c.log.Info("time synced: going on", slog.String(logkey.Before, c.before))

			return nil
		}

		attrs := []slog.Attr{slog.Any(logkey.Servers, c.servers), slog.String(logkey.Before, c.before)}
		if err := c.svc.Status().LastError; err != nil {
			attrs = append(attrs, slog.String(logkey.LastError, err.Error()))
		}

		c.log.LogAttrs(ctx, level, "waiting for time sync", attrs...)
		level = slog.LevelWarn

		remind := c.clock.NewTimer(timeWaitReminder)

		select {
		case <-changed:
		case <-remind.C():
		case <-ctx.Done():
			remind.Stop()

			return ctx.Err()
		}

		remind.Stop()
	}
}

// timeCondition is the current boot's time sync, for what waits before
// doing before.
func (n *Node) timeCondition(b *bootState, before string) *timeSynced {
	return &timeSynced{
		svc: b.time, servers: b.cfg.Machine.Time.Servers, before: before,
		clock: n.clock, log: n.log, unmet: n.unmetTime,
	}
}

// certsPresent is the condition "node certificates": it holds once the
// resources store has the node's server certificate and, if wanted, its
// impersonator certificate. apid settles whether it forwards on its first
// resources, so a control plane's apid must see both at once.
type certsPresent struct {
	store        *resources.Store
	impersonator bool
}

func (c certsPresent) String() string { return "node certificates" }

func (c certsPresent) Wait(ctx context.Context) error {
	for {
		res, changed := c.store.Current()
		if c.holds(res) {
			return nil
		}

		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c certsPresent) holds(res *node.Resources) bool {
	return res.GetServer() != nil && (!c.impersonator || res.GetImpersonator() != nil)
}
