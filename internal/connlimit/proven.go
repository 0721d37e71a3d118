package connlimit

import (
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// Pools of a connection: the table it counts against.
const (
	poolAnonymous = iota // Total and PerSource, with eviction and waiting
	poolProven           // ProvenTotal and ProvenPerSource: never evicted
	poolRoom             // HandshakeRoom: a handshake that may prove a node
)

// errAnonymousFull closes a connection let in through the handshake room
// that proved nothing, while every anonymous slot is still taken.
var errAnonymousFull = errors.New("connlimit: every connection slot for callers without a node certificate is taken; try again later")

// proven is the table of connections whose client proved itself in the
// handshake.
type proven struct {
	open     int
	bySource map[string]int
}

// provenRoomLocked reports whether src may hold one more proven
// connection, counting the handshakes of the room as proven already.
func (l *Limiter) provenRoomLocked(src string) bool {
	held := l.proven.bySource[src] + l.room.of(src)

	return l.proven.open+l.room.len() < l.cfg.ProvenTotal && held < l.cfg.ProvenPerSource
}

// roomLocked reports whether a newcomer of src, for whom the anonymous
// table has no slot, may do its handshake in the handshake room: the
// Limiter has a proven pool with room for src, and src is no suspect.
// When the room is full, the oldest handshake in it gives its place, and
// roomLocked returns it, to close once the lock is released.
func (l *Limiter) roomLocked(src string) (*conn, bool) {
	if l.cfg.ProvenTotal == 0 || l.suspects.has(src, l.cfg.Clock.Now()) || !l.provenRoomLocked(src) {
		return nil, false
	}

	if l.strangersInRoomLocked() < l.cfg.HandshakeRoom {
		return nil, true
	}

	// A handshake under way, or just ended, keeps its place, as in the
	// table (evictableLocked).
	now := l.cfg.Clock.Now()

	for e := l.room.strangers.Front(); e != nil; e = e.Next() {
		if c, _ := e.Value.(*conn); !c.provingLocked(now) && c.state.CompareAndSwap(stateWaiting, stateClosed) {
			l.dropRoomLocked(c)
			c.released = true
			l.wastedLocked(c.source)
			l.stats.Evicted++

			return c, true
		}
	}

	return nil, false
}

// addRoomLocked admits c to the handshake room.
func (l *Limiter) addRoomLocked(c *conn) {
	c.pool = poolRoom
	c.admitted = l.cfg.Clock.Now()
	l.room.add(c)
	l.byAddr[c.key] = c
}

// dropRoomLocked takes c out of the handshake room; the table by address
// keeps it only when it moves to another pool.
func (l *Limiter) dropRoomLocked(c *conn) {
	l.room.drop(c)

	delete(l.byAddr, c.key)
}

// releaseProvenLocked frees the proven slot of c.
func (l *Limiter) releaseProvenLocked(c *conn) {
	l.proven.open--

	if l.proven.bySource[c.source]--; l.proven.bySource[c.source] <= 0 {
		delete(l.proven.bySource, c.source)
	}
}

// settle files c once its handshake is over: a client that proved itself
// moves to the proven table, if it has room, and frees its anonymous slot
// for the next newcomer; a handshake of the room that proved nothing
// takes an anonymous slot if one is free, and is refused otherwise.
func (l *Limiter) settle(c *conn, isProven bool) error {
	var (
		refused int
		victim  *conn
	)

	l.mu.Lock()

	if isProven && !c.released {
		l.knowLocked(c.source)
	}

	// A known source's handshake that proved nothing (a node joining again
	// with a token) is a newcomer to the anonymous table, as it would have
	// been without the room: it may take a stranger's slot, unless its
	// source is a suspect (as a suspect stranger gets no room either).
	roomForKnown := false
	if !c.released && !isProven && c.pool == poolRoom && c.known && l.stats.Open >= l.cfg.Total &&
		!l.suspects.has(c.source, l.cfg.Clock.Now()) {
		victim, roomForKnown = l.makeRoom(c.source, false)
	}

	switch {
	case c.released:
	case isProven && (c.pool == poolRoom || l.provenRoomLocked(c.source)):
		l.toProvenLocked(c)
	case c.pool != poolRoom:
	case roomForKnown || l.stats.Open < l.cfg.Total:
		l.dropRoomLocked(c)
		c.pool, c.known = poolAnonymous, false
		l.addLocked(c)
	default:
		l.dropRoomLocked(c)
		c.released = true

		// A known source that proved nothing may be joining again with a
		// token: no strike.
		if !c.known {
			l.wastedLocked(c.source)
		}

		refused = l.refusedLocked()
		l.mu.Unlock()
		l.logRefusals(c.LocalAddr(), c.source, refused)

		return errAnonymousFull
	}

	l.mu.Unlock()

	if victim != nil {
		_ = victim.Close()
	}

	return nil
}

// toProvenLocked moves c to the proven table; it stays in the table by
// address, so that its calls are seen (StatsHandler).
func (l *Limiter) toProvenLocked(c *conn) {
	if c.pool == poolRoom {
		l.dropRoomLocked(c)
		l.byAddr[c.key] = c
	} else {
		l.detachLocked(c)
		l.admitWaiterLocked()
	}

	c.pool = poolProven
	l.proven.open++
	l.proven.bySource[c.source]++
}

// Credentials wraps a gRPC server's transport credentials so that the end
// of each handshake on l's listeners tells l whether the client proved
// itself: isProven judges the verified TLS state (a node certificate of an
// accepted CA, say). A proven connection leaves the anonymous table for the
// proven one (Config.ProvenTotal); a handshake let in through the room
// that proved nothing is closed when the anonymous table is still full.
// Give it to the gRPC server with the listener from Wrap.
func (l *Limiter) Credentials(tc credentials.TransportCredentials, isProven func(tls.ConnectionState) bool) credentials.TransportCredentials {
	return &settling{TransportCredentials: tc, l: l, isProven: isProven}
}

type settling struct {
	credentials.TransportCredentials

	l        *Limiter
	isProven func(tls.ConnectionState) bool
}

func (s *settling) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, ok := raw.(*conn)
	if !ok || c.l != s.l {
		return s.TransportCredentials.ServerHandshake(raw)
	}

	if err := s.l.enterGate(c); err != nil {
		return nil, nil, err
	}

	secured, info, err := s.TransportCredentials.ServerHandshake(raw)

	s.l.leaveGate(c)

	if err != nil {
		return secured, info, err
	}

	tlsInfo, ok := info.(credentials.TLSInfo)
	if err := s.l.settle(c, ok && s.isProven(tlsInfo.State)); err != nil {
		_ = secured.Close()

		return nil, nil, err
	}

	return secured, info, nil
}

func (s *settling) Clone() credentials.TransportCredentials {
	return &settling{TransportCredentials: s.TransportCredentials.Clone(), l: s.l, isProven: s.isProven}
}

// checkProvenConfig checks the proven part of a Config.
func checkProvenConfig(cfg Config) error {
	switch {
	case cfg.ProvenTotal < 0 || cfg.ProvenPerSource < 0 || cfg.HandshakeRoom < 0:
		return errors.New("connlimit: ProvenTotal, ProvenPerSource and HandshakeRoom must not be negative")
	case cfg.ProvenTotal == 0:
		return nil
	case cfg.ProvenPerSource == 0 || cfg.ProvenPerSource >= cfg.ProvenTotal:
		return errors.New("connlimit: ProvenPerSource must be positive and below ProvenTotal")
	case cfg.HandshakeRoom == 0 || cfg.HandshakeRoom > cfg.ProvenTotal:
		return errors.New("connlimit: HandshakeRoom must be positive and at most ProvenTotal")
	}

	return nil
}
