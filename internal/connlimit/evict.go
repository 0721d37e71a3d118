package connlimit

import (
	"container/list"
	"slices"
	"time"
)

// sourceConns is what the table holds of one source.
type sourceConns struct {
	key  string
	open int // open connections, with or without a call
	// uncalled are the open connections that have made no call, oldest
	// first: at most Config.PerSource.
	uncalled []*conn
	// rank is the source's entry in Limiter.ranks[class][len(uncalled)];
	// nil when it holds no connection without a call.
	rank  *list.Element
	class int
}

// Classes of sources, in the order their connections are evicted.
const (
	classSuspect = iota // wasted a slot lately (suspects)
	classOther
	classes
)

// ranks sorts sources by class, then by how many connections without a
// call they hold: ranks[class][n] lists the sources of class holding n, in
// the order they came to hold n. An eviction takes from the front of the
// highest rank of the first class that has one, in constant time whatever
// the number of sources.
type ranks [classes][]*list.List

func newRanks(perSource int) *ranks {
	var r ranks

	for c := range r {
		r[c] = make([]*list.List, perSource+1)
		for n := range r[c] {
			r[c][n] = list.New()
		}
	}

	return &r
}

// each calls f with the sources holding connections without a call, in
// the order their connections go (see ranks), until f returns false.
func (r *ranks) each(f func(*sourceConns) bool) {
	for _, byCount := range r {
		for n := len(byCount) - 1; n > 0; n-- {
			for e := byCount[n].Front(); e != nil; e = e.Next() {
				if !f(e.Value.(*sourceConns)) {
					return
				}
			}
		}
	}
}

// rankLocked files s under its class and the count of its connections
// without a call now, after it held from of them.
func (l *Limiter) rankLocked(s *sourceConns, from int) {
	if s.rank != nil {
		l.ranks[s.class][from].Remove(s.rank)
		s.rank = nil
	}

	if n := len(s.uncalled); n > 0 {
		s.class = classOther
		if l.suspects.has(s.key, l.cfg.Clock.Now()) {
			s.class = classSuspect
		}

		s.rank = l.ranks[s.class][n].PushBack(s)
	}
}

// addUncalledLocked records c, new, as a connection without a call.
func (l *Limiter) addUncalledLocked(s *sourceConns, c *conn) {
	s.uncalled = append(s.uncalled, c)
	l.rankLocked(s, len(s.uncalled)-1)
}

// dropUncalledLocked forgets c as a connection without a call, if it was
// one: it made a call, or is closed.
func (l *Limiter) dropUncalledLocked(s *sourceConns, c *conn) {
	i := slices.Index(s.uncalled, c)
	if i < 0 {
		return
	}

	s.uncalled = slices.Delete(s.uncalled, i, i+1)
	l.rankLocked(s, len(s.uncalled)+1)
}

// called records that c made a call: it is no longer one to evict, and
// its source is no longer a suspect.
func (l *Limiter) called(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()

	l.suspects.clear(c.source)
	l.leaveGateLocked(c)

	if s := l.sources[c.source]; s != nil && !c.released && c.pool == poolAnonymous {
		l.dropUncalledLocked(s, c)
	}
}

// wastedLocked records that a connection of src was closed for making no
// call: a strike against src (suspects).
func (l *Limiter) wastedLocked(src string) {
	l.suspects.strike(src, l.cfg.Clock.Now())

	if s := l.sources[src]; s != nil && s.rank != nil && s.class != classSuspect {
		l.rankLocked(s, len(s.uncalled))
	}
}

// evictableLocked picks a connection that has made no call: of a suspect
// source first (suspects), then of the source holding the most such
// connections (the first to hold that many, when several do), its oldest;
// nil when every connection has made a call. A connection that made a
// call is never picked, so callers that proved themselves keep their slots
// however many anonymous sources connect; and a newcomer from an address
// that wasted no slot lately, its source's only connection, goes last.
// A connection whose TLS handshake is under way (holding its place at the
// gate), or ended less than MinEvictAge ago with its first call still to
// come, is never picked either: its CPU was spent, on both sides, and
// evicting it throws that away for a newcomer that would spend as much
// again. A join storm of 10,000 against slots for 576 did so until no
// handshake finished (11,000 evictions a trustd and no certificate signed
// in its first 20 s). The gate bounds the handshakes under way
// (Config.MaxHandshakes) and displaces a stranger's that stalls
// (GateEvictAge); one that made no call within MinEvictAge of its end is
// idle. A suspect's connection is spared none of this. When spareYoung, a connection of a source that is no suspect is
// picked only once MinEvictAge old, its age counted from its latest
// handshake if it had one: a burst of honest clients larger than the
// table (a join storm) then waits for slots rather than evicting each
// other. It marks the connection evicted so that a call can no longer
// claim it.
func (l *Limiter) evictableLocked(spareYoung bool) *conn {
	for {
		c, s := l.firstEvictableLocked()
		if c == nil {
			return nil
		}

		if spareYoung && s.class != classSuspect && l.cfg.Clock.Now().Sub(c.since()) < MinEvictAge {
			return nil
		}

		if c.state.CompareAndSwap(stateWaiting, stateClosed) {
			return c
		}

		// Its call started and its record (called) waits for the lock.
		l.dropUncalledLocked(s, c)
	}
}

// firstEvictableLocked is the connection without a call that goes first,
// and its source; nil when there is none. It passes over the connections
// proving themselves (provingLocked): at most Config.MaxHandshakes under
// way, and those that ended theirs within MinEvictAge. A suspect's are
// not spared: a flood that finishes its handshakes and makes no call
// would hold its slots so.
func (l *Limiter) firstEvictableLocked() (*conn, *sourceConns) {
	var (
		first *conn
		from  *sourceConns
		now   = l.cfg.Clock.Now()
	)

	l.ranks.each(func(s *sourceConns) bool {
		for _, c := range s.uncalled {
			if s.class == classSuspect || !c.provingLocked(now) {
				first, from = c, s

				return false
			}
		}

		return true
	})

	return first, from
}

// provingLocked reports whether c's handshake is under way at the gate, or
// ended less than MinEvictAge before now: its first call is on its way.
func (c *conn) provingLocked(now time.Time) bool {
	return c.atGate != nil || !c.leftGate.IsZero() && now.Sub(c.leftGate) < MinEvictAge
}

// since is when c last began to prove itself: its latest handshake's start
// at the gate, or its admission when it has had none there.
func (c *conn) since() time.Time {
	if c.gatedAt.After(c.admitted) {
		return c.gatedAt
	}

	return c.admitted
}
