package node

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// CertificatesService is the ID of the service that issues (control plane)
// or obtains through trustd (worker) the node's certificates and renews
// them.
const CertificatesService = "certificates"

// certService runs the current boot's certController as a service, so that
// its wait for time sync shows in ServiceList and Events like any other
// service's wait: a certificate issued or renewed by an unsynced clock
// could be dated wrong, and a worker's trustd refuses to sign until its own
// clock is synced anyway.
type certService struct{ n *Node }

func (certService) ID() string          { return CertificatesService }
func (certService) DependsOn() []string { return nil }

// Condition is the current boot's time sync.
func (s certService) Condition() system.Condition {
	b := s.n.config.boot()

	before := "renewing node certificates"
	if res, _ := s.n.store.Current(); !(certsPresent{impersonator: b.cfg.OSCA() != nil}).holds(res) {
		before = "issuing node certificates"
	}

	return s.n.timeCondition(b, before)
}

// Runner runs the current boot's controller until the service stops; a
// failure (a control plane unable to issue) is retried with backoff.
func (s certService) Runner() (runner.Runner, error) {
	ctl := s.n.config.boot().certs

	var log io.Writer = io.Discard
	if l, ok := s.n.logs["machined"]; ok {
		log = l
	}

	return runner.Restart(
		runner.Goroutine(CertificatesService, log, func(ctx context.Context, _ io.Writer) error { return ctl.run(ctx) }),
		runner.RestartConfig{Policy: runner.Forever, Clock: s.n.clock},
	), nil
}

// HealthCheck is healthy while the node holds a usable certificate of
// every kind it needs: unhealthy while a worker joins, and if a
// certificate expires because renewals keep failing.
func (s certService) HealthCheck() (health.Check, health.Settings) {
	return func(context.Context) error {
		ctl := s.n.config.boot().certs
		for _, kind := range ctl.kinds() {
			if ctl.held(kind) == nil {
				return fmt.Errorf("no usable %s certificate", kind.name)
			}
		}

		return nil
	}, health.Settings{InitialDelay: 100 * time.Millisecond, Period: 2 * time.Second}
}
