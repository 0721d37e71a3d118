package connlimit

import (
	"container/list"
	"time"
)

// suspects are the sources whose connections were closed for making no
// call (evicted, or past Config.FirstCall) SuspectStrikes times, each
// within SuspectFor of the one before, and that have made no call since:
// what a flood's sources are after their first rounds, and what a client
// evicted once in its handshake is not. When every slot is
// taken, their connections go before those of other sources, so that a
// client from an address that has not wasted a slot lately (a node that
// joins, an operator) gets in and makes its call whatever the flood's rate.
// The set holds at most MaxSuspects sources, forgetting the one struck
// longest ago, so its memory is bounded whatever the number of addresses.
type suspects struct {
	max    int
	byKey  map[string]*list.Element // of *suspect
	struck *list.List               // least recently struck first
}

type suspect struct {
	key     string
	at      time.Time // of the last strike
	strikes int
}

func newSuspects(max int) *suspects {
	return &suspects{max: max, byKey: map[string]*list.Element{}, struck: list.New()}
}

// strike records that src wasted a slot at now.
func (s *suspects) strike(src string, now time.Time) {
	if e, ok := s.byKey[src]; ok {
		v := e.Value.(*suspect)
		if now.Sub(v.at) >= SuspectFor {
			v.strikes = 0
		}

		v.at = now
		v.strikes++
		s.struck.MoveToBack(e)

		return
	}

	if s.struck.Len() >= s.max {
		oldest := s.struck.Front()
		delete(s.byKey, oldest.Value.(*suspect).key)
		s.struck.Remove(oldest)
	}

	s.byKey[src] = s.struck.PushBack(&suspect{key: src, at: now, strikes: 1})
}

// clear forgets src, which made a call.
func (s *suspects) clear(src string) {
	if e, ok := s.byKey[src]; ok {
		delete(s.byKey, src)
		s.struck.Remove(e)
	}
}

// has reports whether src is a suspect at now; it forgets src once
// SuspectFor has passed since its last strike.
func (s *suspects) has(src string, now time.Time) bool {
	e, ok := s.byKey[src]
	if !ok {
		return false
	}

	if v := e.Value.(*suspect); now.Sub(v.at) < SuspectFor {
		return v.strikes >= SuspectStrikes
	}

	delete(s.byKey, src)
	s.struck.Remove(e)

	return false
}
