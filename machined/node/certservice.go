package node

import (
	"context"
	"io"

	"github.com/aegis-os/aegis/machined/system"
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
	b := s.n.currentBoot()

	before := "renewing node certificates"
	if res, _ := s.n.store.Current(); !(certsPresent{impersonator: b.cfg.OSCA() != nil}).holds(res) {
		before = "issuing node certificates"
	}

	return s.n.timeCondition(b, before)
}

// Runner runs the current boot's controller until the service stops; a
// failure (a control plane unable to issue) is retried with backoff.
func (s certService) Runner() (runner.Runner, error) {
	ctl := s.n.currentBoot().certs

	var log io.Writer = io.Discard
	if l, ok := s.n.logs["machined"]; ok {
		log = l
	}

	return runner.Restart(
		runner.Goroutine(CertificatesService, log, func(ctx context.Context, _ io.Writer) error { return ctl.run(ctx) }),
		runner.RestartConfig{Policy: runner.Forever, Clock: s.n.clock},
	), nil
}
