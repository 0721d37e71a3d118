package connlimit

import (
	"container/list"
	"slices"
)

// sourceConns is what the table holds of one source.
type sourceConns struct {
	open int // open connections, with or without a call
	// uncalled are the open connections that have made no call, oldest
	// first: at most Config.PerSource.
	uncalled []*conn
	// rank is the source's entry in Limiter.ranks[len(uncalled)]; nil when
	// it holds no connection without a call.
	rank *list.Element
}

// ranks sorts sources by how many connections without a call they hold:
// ranks[n] lists the sources holding n, in the order they came to hold n.
// An eviction takes from the front of the highest rank, in constant time
// whatever the number of sources.
type ranks []*list.List

func newRanks(perSource int) ranks {
	r := make(ranks, perSource+1)
	for i := range r {
		r[i] = list.New()
	}

	return r
}

// move files s under the rank of its connections without a call now,
// after it held from of them.
func (r ranks) move(s *sourceConns, from int) {
	if s.rank != nil {
		r[from].Remove(s.rank)
		s.rank = nil
	}

	if n := len(s.uncalled); n > 0 {
		s.rank = r[n].PushBack(s)
	}
}

// top is the source holding the most connections without a call, the
// first to hold that many; nil when there is none.
func (r ranks) top() *sourceConns {
	for n := len(r) - 1; n > 0; n-- {
		if e := r[n].Front(); e != nil {
			return e.Value.(*sourceConns)
		}
	}

	return nil
}

// addUncalledLocked records c, new, as a connection without a call.
func (l *Limiter) addUncalledLocked(s *sourceConns, c *conn) {
	s.uncalled = append(s.uncalled, c)
	l.ranks.move(s, len(s.uncalled)-1)
}

// dropUncalledLocked forgets c as a connection without a call, if it was
// one: it made a call, or is closed.
func (l *Limiter) dropUncalledLocked(s *sourceConns, c *conn) {
	i := slices.Index(s.uncalled, c)
	if i < 0 {
		return
	}

	s.uncalled = slices.Delete(s.uncalled, i, i+1)
	l.ranks.move(s, len(s.uncalled)+1)
}

// called records that c made a call: it is no longer one to evict.
func (l *Limiter) called(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if s := l.sources[c.source]; s != nil && !c.released {
		l.dropUncalledLocked(s, c)
	}
}

// evictableLocked picks a connection that has made no call, of the source
// holding the most such connections (the first to hold that many, when
// several do), its oldest; nil when every connection has made a call. A
// connection that made a call is never picked, so callers that proved
// themselves keep their slots however many anonymous sources connect; and
// a newcomer, its source's only connection, is picked only once no source
// holds more than one, which a flood from few addresses cannot bring
// about. It marks the connection evicted so that a call can no longer
// claim it.
func (l *Limiter) evictableLocked() *conn {
	for {
		s := l.ranks.top()
		if s == nil {
			return nil
		}

		c := s.uncalled[0]
		if c.state.CompareAndSwap(stateWaiting, stateClosed) {
			return c
		}

		// Its call started and its record (called) waits for the lock.
		l.dropUncalledLocked(s, c)
	}
}
