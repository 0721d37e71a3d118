package connlimit

import (
	"container/list"
	"time"
)

// suspects are the sources whose connections were closed for making no
// call (evicted, or past Config.FirstCall) within the last SuspectFor:
// what a flood's sources are after their first round. When every slot is
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
	key string
	at  time.Time
}

func newSuspects(max int) *suspects {
	return &suspects{max: max, byKey: map[string]*list.Element{}, struck: list.New()}
}

// strike records that src wasted a slot at now.
func (s *suspects) strike(src string, now time.Time) {
	if e, ok := s.byKey[src]; ok {
		e.Value.(*suspect).at = now
		s.struck.MoveToBack(e)

		return
	}

	if s.struck.Len() >= s.max {
		oldest := s.struck.Front()
		delete(s.byKey, oldest.Value.(*suspect).key)
		s.struck.Remove(oldest)
	}

	s.byKey[src] = s.struck.PushBack(&suspect{key: src, at: now})
}

// has reports whether src wasted a slot within SuspectFor before now; it
// forgets src when that is over.
func (s *suspects) has(src string, now time.Time) bool {
	e, ok := s.byKey[src]
	if !ok {
		return false
	}

	if now.Sub(e.Value.(*suspect).at) < SuspectFor {
		return true
	}

	delete(s.byKey, src)
	s.struck.Remove(e)

	return false
}
