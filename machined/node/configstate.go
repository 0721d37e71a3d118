package node

import (
	"sync"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/timeapi"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/timesync"
)

// configState is the machine config in effect and what the current boot
// built that is reached from outside the boot: by ApplyConfig, a reset, a
// re-issue, the TimeService and the services' arguments.
type configState struct {
	mu      sync.Mutex
	machine *certs.MachineConfig // the config in effect
	booted  *bootState           // what the current boot built, for services loaded once
	// timeSvc is the latest boot's time service, kept until the next boot
	// has its own.
	timeSvc *timesync.Service
}

// current is the config in effect.
func (s *configState) current() *certs.MachineConfig {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.machine
}

// set puts cfg in effect.
func (s *configState) set(cfg *certs.MachineConfig) {
	s.mu.Lock()
	s.machine = cfg
	s.mu.Unlock()
}

// setLive puts cfg in effect and returns the current boot's time service,
// if it has one yet.
func (s *configState) setLive(cfg *certs.MachineConfig) *timesync.Service {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.machine = cfg
	if s.booted == nil {
		return nil
	}

	return s.booted.time
}

// startBoot makes b the current boot.
func (s *configState) startBoot(b *bootState) {
	s.mu.Lock()
	s.booted = b
	s.mu.Unlock()
}

func (s *configState) boot() *bootState {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.booted
}

// bootConfig is the machine config the current boot read: what its
// services start with.
func (s *configState) bootConfig() *certs.MachineConfig {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.booted != nil && s.booted.cfg != nil {
		return s.booted.cfg
	}

	return s.machine
}

// setTime gives boot b its time service, which ApplyConfig reaches
// through the boot.
func (s *configState) setTime(b *bootState, svc *timesync.Service) {
	s.mu.Lock()
	b.time, s.timeSvc = svc, svc
	s.mu.Unlock()
}

// timeService is the time service of the latest boot, nil before the
// first.
func (s *configState) timeService() *timesync.Service {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.timeSvc
}

// timeSource is the time service of the current boot, for the TimeService.
func (s *configState) timeSource() timeapi.TimeSource {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.timeSvc == nil {
		return nil // an interface holding a nil pointer would not be nil
	}

	return s.timeSvc
}

// setCertController gives boot b its certificates, which a re-issue and
// ApplyConfig reach through the boot.
func (s *configState) setCertController(b *bootState, c *certController) {
	s.mu.Lock()
	b.certs = c
	s.mu.Unlock()
}

// certController is the current boot's, or nil before it has one.
func (s *configState) certController() *certController {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.booted == nil {
		return nil
	}

	return s.booted.certs
}

// setTrustd gives a worker's boot b its client of trustd, which a reset
// reaches from outside the boot.
func (s *configState) setTrustd(b *bootState, c *trustdclient.Client) {
	s.mu.Lock()
	b.trustd = c
	s.mu.Unlock()
}

func (s *configState) trustd(b *bootState) *trustdclient.Client {
	s.mu.Lock()
	defer s.mu.Unlock()

	return b.trustd
}
