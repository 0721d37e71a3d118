package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/logkey"
)

// nameRenewalSpacing is the least time between two renewals a worker makes
// because a heartbeat was refused for want of its name in its certificate:
// a control plane upgraded to check names gets the worker's name within
// minutes, while a token whose patterns leave the name out (each renewal
// obtaining a certificate without it again) costs trustd a few signatures
// an hour, not one per heartbeat.
const nameRenewalSpacing = 10 * time.Minute

// joinPair are the join clients of a worker: one asking for its name, and
// one without it for a control plane of the previous version, whose trustd
// grants no name to a token without DNS patterns. The node is then known by
// its address alone until a control plane that checks names signs its next
// certificate.
type joinPair struct {
	c            *certController
	named, bare  *joinClients
	nameInBundle bool
}

func (c *certController) joinPair(source, cn string, sans []string, maxAttempts func(*certs.MachineConfig) int) joinPair {
	bare := slices.DeleteFunc(slices.Clone(sans), func(h string) bool { return h == c.hostname })

	return joinPair{
		c:            c,
		named:        &joinClients{c: c, cn: cn, source: source, sans: sans, maxAttempts: maxAttempts},
		bare:         &joinClients{c: c, cn: cn, source: source, sans: bare, maxAttempts: maxAttempts},
		nameInBundle: len(bare) != len(sans),
	}
}

// join obtains a certificate naming the node, or, when trustd refuses the
// name as a control plane of the previous version does, one without it.
func (p joinPair) join(ctx context.Context) (*join.Result, *certs.MachineConfig, error) {
	res, cfg, err := p.named.join(ctx)
	if err == nil || !p.nameInBundle || !refusesName(err, p.c.hostname) {
		return res, cfg, err
	}

	p.c.log.Warn("trustd refused the node's name as no allowed SAN (a control plane of the previous version, or a token "+
		"whose patterns leave it out); obtaining a certificate without it: heartbeats to control planes that check names "+
		"are refused until one signs a certificate with it", slog.String(logkey.Error, err.Error()))

	return p.bare.join(ctx)
}

func (j *joinClients) join(ctx context.Context) (*join.Result, *certs.MachineConfig, error) {
	client, cfg, err := j.get()
	if err != nil {
		return nil, nil, err
	}

	res, err := client.Join(ctx)

	return res, cfg, err
}

// refusesName reports whether err is trustd refusing hostname as not
// permitted to the token (InvalidArgument naming the DNS name), rather
// than as held by another node or a control plane (PermissionDenied),
// which a certificate without the name must not get round.
func refusesName(err error, hostname string) bool {
	return status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), fmt.Sprintf("DNS name %q", hostname))
}

// renewForName renews the worker's certificate when a heartbeat was
// refused because the certificate does not carry the node's name, at most
// every nameRenewalSpacing.
func (c *certController) renewForName(ctx context.Context, heartbeat error) {
	if c == nil || heartbeat == nil || !strings.Contains(heartbeat.Error(), "does not name hostname") {
		return
	}

	now := c.clock.Now()

	c.mu.Lock()
	due := c.lastNameRenewal.IsZero() || now.Sub(c.lastNameRenewal) >= nameRenewalSpacing
	if due {
		c.lastNameRenewal = now
	}
	c.mu.Unlock()

	if !due {
		return
	}

	c.log.Info("heartbeat refused for want of the node's name in its certificate; renewing it now")

	if _, err := c.reissue(ctx); err != nil {
		c.log.Warn("renewing the certificate for the node's name", slog.String(logkey.Error, err.Error()))
	}
}
