// Package timesync is the node's time service: it asks the configured NTP
// servers how far the local clock is from theirs and keeps a gate open while
// the answer is within the allowed offset. It only measures; it never sets
// the system clock, which stays the host's business (a host NTP daemon, or
// a hypervisor). trustd refuses to sign while the gate is closed.
package timesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/beevik/ntp"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// QueryFunc asks one NTP server for a reply. server is "host" or
// "host:port" (port 123 by default). It is the seam tests use to feed
// replies; the service validates whatever it returns.
type QueryFunc func(ctx context.Context, server string, timeout time.Duration) (*ntp.Response, error)

// Config configures a Service. Servers or TrustHostClock is required; every
// other field may be left zero. The config is read once by New; Servers,
// TrustHostClock, MaxOffset and PollInterval may change later through
// Reconfigure.
type Config struct {
	// Servers are queried in order each round until one gives a valid reply.
	Servers []string
	// TrustHostClock opens the gate at once and queries nothing.
	TrustHostClock bool
	// MaxOffset is the largest |offset| + RTT/2 that keeps the gate open.
	// Zero means DefaultMaxOffset.
	MaxOffset time.Duration
	// Query asks one server. Nil means a real NTPv4 query (beevik/ntp).
	Query QueryFunc
	// PollInterval, RetryMin, RetryMax and QueryTimeout default to the
	// constants of limits.go.
	PollInterval time.Duration
	RetryMin     time.Duration
	RetryMax     time.Duration
	QueryTimeout time.Duration
	// Clock times the rounds. Nil means the system clock.
	Clock clock.Clock
	// Rand jitters the waits between rounds. Nil means crypto/rand.
	Rand io.Reader
	// Logger receives gate changes and failed rounds. Nil discards.
	Logger *slog.Logger
}

// Status is the service's last measurement, for status APIs and logs.
type Status struct {
	Synced bool
	// Server answered the last valid reply; Offset and RTT are from it.
	Server string
	Offset time.Duration
	RTT    time.Duration
	// Checked is when the last round ended; LastError is its error, if
	// no server gave a valid reply.
	Checked   time.Time
	LastError error
}

// Service measures the clock against NTP servers and drives a Gate.
type Service struct {
	cfg  Config
	gate *Gate

	// wake makes Run start a round at once after Reconfigure.
	wake chan struct{}

	mu       sync.Mutex
	status   Status
	measured chan struct{} // closed and replaced at every new Status
	settings settings
}

// settings are the parts of Config that Reconfigure changes.
type settings struct {
	servers      []string
	trustHost    bool
	maxOffset    time.Duration
	pollInterval time.Duration
}

// New checks cfg and returns a service whose gate is closed, or open at once
// for a trusted host clock.
func New(cfg Config) (*Service, error) {
	if err := checkSettings(cfg.Servers, cfg.TrustHostClock, cfg.MaxOffset); err != nil {
		return nil, err
	}

	cfg.Servers = append([]string(nil), cfg.Servers...)
	setDefaults(&cfg)

	s := &Service{cfg: cfg, gate: NewGate(cfg.TrustHostClock), measured: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.status.Synced = cfg.TrustHostClock
	s.settings = settings{servers: cfg.Servers, trustHost: cfg.TrustHostClock, maxOffset: cfg.MaxOffset, pollInterval: cfg.PollInterval}

	return s, nil
}

func checkSettings(servers []string, trustHost bool, maxOffset time.Duration) error {
	switch {
	case trustHost && len(servers) > 0:
		return errors.New("timesync: servers and a trusted host clock exclude each other")
	case !trustHost && len(servers) == 0:
		return errors.New("timesync: no NTP servers")
	case len(servers) > MaxServers:
		return fmt.Errorf("timesync: %d servers, limit %d", len(servers), MaxServers)
	case maxOffset < 0:
		return fmt.Errorf("timesync: negative max offset %s", maxOffset)
	}

	return nil
}

// Reconfigure changes the servers, the trust in the host clock, the
// offset bound and the poll interval (zero: DefaultPollInterval) of a
// running service, which starts a round with them at once. Leaving a trusted host clock closes the gate until a server says
// the clock is right (fail closed); with servers, the gate stays as the
// old servers left it until the first valid reply of the new ones.
func (s *Service) Reconfigure(servers []string, trustHost bool, maxOffset, pollInterval time.Duration) error {
	if err := checkSettings(servers, trustHost, maxOffset); err != nil {
		return err
	}

	if pollInterval < 0 {
		return fmt.Errorf("timesync: negative poll interval %s", pollInterval)
	}

	if maxOffset == 0 {
		maxOffset = DefaultMaxOffset
	}

	if pollInterval == 0 {
		pollInterval = DefaultPollInterval
	}

	s.mu.Lock()
	wasTrusted := s.settings.trustHost
	s.settings = settings{servers: append([]string(nil), servers...), trustHost: trustHost, maxOffset: maxOffset, pollInterval: pollInterval}

	if trustHost {
		s.status = Status{Synced: true, Checked: s.cfg.Clock.Now()}
	}

	// Whoever shows the settings or the status (the time resources) reads
	// them again.
	close(s.measured)
	s.measured = make(chan struct{})
	s.mu.Unlock()

	switch {
	case trustHost:
		s.gate.Set(true)
	case wasTrusted:
		s.gate.Set(false)
	}

	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending
	}

	return nil
}

func (s *Service) current() settings {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.settings
}

func setDefaults(cfg *Config) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}

	def(&cfg.MaxOffset, DefaultMaxOffset)
	def(&cfg.PollInterval, DefaultPollInterval)
	def(&cfg.RetryMin, DefaultRetryMin)
	def(&cfg.RetryMax, DefaultRetryMax)
	def(&cfg.QueryTimeout, DefaultQueryTimeout)

	if cfg.Query == nil {
		cfg.Query = NTPQuery
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Logger = defaults.Logger(cfg.Logger)
}

// NTPQuery is the real query: NTPv4 over UDP through beevik/ntp.
func NTPQuery(_ context.Context, server string, timeout time.Duration) (*ntp.Response, error) {
	return ntp.QueryWithOptions(server, ntp.QueryOptions{Timeout: timeout})
}

// Synced reports whether the gate is open.
func (s *Service) Synced() bool { return s.gate.Synced() }

// Changed returns a channel closed at the gate's next change.
func (s *Service) Changed() <-chan struct{} { return s.gate.Changed() }

// Measured returns a channel closed when the next round has ended: Status
// then holds a new measurement (offsets change without the gate changing).
func (s *Service) Measured() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.measured
}

// Servers returns the configured NTP servers.
func (s *Service) Servers() []string { return append([]string(nil), s.current().servers...) }

// TrustHostClock reports whether the host clock is trusted without measuring.
func (s *Service) TrustHostClock() bool { return s.current().trustHost }

// Query asks server for the time with the service's timeout and checks
// the reply as a round does, without touching the gate or the status:
// TimeCheck's one-off comparison.
func (s *Service) Query(ctx context.Context, server string) (*ntp.Response, error) {
	return s.query(ctx, server)
}

// Status returns the last measurement.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.status
}

// LastMeasurement is what the last valid reply measured: the server that
// gave it, the local clock's offset from it, and when its round ended
// (zero before any server answered). It is Status in plain values, for
// readers that should not import this package.
func (s *Service) LastMeasurement() (server string, offset time.Duration, checked time.Time) {
	st := s.Status()

	return st.Server, st.Offset, st.Checked
}

// Run queries the servers in rounds until ctx ends: every PollInterval
// while the clock is within bounds, with backoff from RetryMin to RetryMax
// otherwise. With a trusted host clock it only waits for ctx.
func (s *Service) Run(ctx context.Context) error {
	retry := backoff.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax, Rand: s.cfg.Rand}

	for {
		if s.current().trustHost {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				continue
			}
		}

		wait := s.current().pollInterval
		if s.round(ctx) {
			retry.Reset()
		} else {
			wait = retry.Next()
		}

		if !s.sleep(ctx, wait) {
			return nil
		}
	}
}

// sleep waits d or until Reconfigure wakes the service; it reports false
// when ctx ends.
func (s *Service) sleep(ctx context.Context, d time.Duration) bool {
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return false
	case <-t.C():
	case <-s.wake:
	}

	return true
}
