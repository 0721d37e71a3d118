package timesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/beevik/ntp"

	"github.com/aegis-os/aegis/internal/logkey"
)

// errOutOfBounds marks a valid reply that shows the clock too far off.
var errOutOfBounds = errors.New("timesync: local clock outside the allowed offset")

// round queries the servers in order until one gives a valid reply, moves
// the gate by that reply, and reports whether the clock is within bounds.
// A round with no valid reply leaves the gate as it was: a server being
// unreachable says nothing about the clock.
func (s *Service) round(ctx context.Context) bool {
	var errs []error

	set := s.current()

	for _, server := range set.servers {
		if ctx.Err() != nil {
			return false
		}

		resp, err := s.query(ctx, server)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", server, err))

			continue
		}

		return s.decide(server, resp, set.maxOffset)
	}

	err := errors.Join(errs...)
	s.record(Status{Synced: s.gate.Synced(), LastError: err})
	s.cfg.Logger.Warn("no NTP server gave a valid reply", slog.String(logkey.Error, err.Error()))

	return false
}

// query asks one server and validates the reply as beevik/ntp defines a
// reply fit for synchronization (stratum, leap indicator, dispersion,
// freshness), and refuses a negative round trip, which only a broken
// clock or a forged reply gives.
func (s *Service) query(ctx context.Context, server string) (*ntp.Response, error) {
	resp, err := s.cfg.Query(ctx, server, s.cfg.QueryTimeout)
	if err != nil {
		return nil, err
	}

	if resp == nil {
		return nil, errors.New("timesync: empty reply")
	}

	if err = resp.Validate(); err != nil {
		return nil, fmt.Errorf("timesync: invalid reply: %w", err)
	}

	if resp.RTT < 0 {
		return nil, fmt.Errorf("timesync: invalid reply: negative round trip %s", resp.RTT)
	}

	return resp, nil
}

// decide opens or closes the gate by one valid reply. Half the round trip
// is added to the offset: the true offset may lie anywhere within it.
func (s *Service) decide(server string, resp *ntp.Response, maxOffset time.Duration) bool {
	within := withinBound(resp.ClockOffset, resp.RTT, maxOffset)

	st := Status{Synced: within, Server: server, Offset: resp.ClockOffset, RTT: resp.RTT}
	if !within {
		st.LastError = fmt.Errorf("%w: offset %s, round trip %s (max %s)", errOutOfBounds, resp.ClockOffset, resp.RTT, maxOffset)
	}

	s.record(st)

	attrs := []any{
		slog.String(logkey.Server, server), slog.Duration(logkey.Offset, resp.ClockOffset),
		slog.Duration(logkey.RTT, resp.RTT), slog.Duration(logkey.MaxOffset, maxOffset),
	}

	if s.gate.Set(within) {
		if within {
			s.cfg.Logger.Info("time synced", attrs...)
		} else {
			s.cfg.Logger.Warn("time out of sync", attrs...)
		}
	}

	return within
}

func (s *Service) record(st Status) {
	st.Checked = s.cfg.Clock.Now()

	s.mu.Lock()
	defer s.mu.Unlock()

	s.status = st

	close(s.measured)
	s.measured = make(chan struct{})
}

// withinBound reports whether |offset| + rtt/2 <= maxOffset. The reply is
// a server's word, extreme values included: the sum is never formed, so
// it cannot overflow into a small number, and the most negative offset,
// which has no absolute value, is out of bounds.
func withinBound(offset, rtt, maxOffset time.Duration) bool {
	if rtt < 0 || offset < -maxOffset || offset > maxOffset {
		return false
	}

	if offset < 0 {
		offset = -offset
	}

	return rtt/2 <= maxOffset-offset
}
