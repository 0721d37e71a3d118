package connlimit

import (
	"net"
	"time"
)

// Known sources. A source is known once a connection of it proved itself
// in its handshake (Credentials), or once the server says so (Know: trustd
// after it signed a node certificate naming the source's address). Before
// its handshake ends nobody has proved anything, and thousands of a
// cluster's nodes reconnecting at once (after a join storm, or after their
// control plane came back) would take the anonymous slots and evict each
// other's handshakes, much as a flood does. A newcomer from a known
// source therefore does its handshake in the handshake room, counted
// against the proven table like the room's other handshakes, where no
// newcomer takes its place: the source's address picks the queue, and
// authorizes nothing. Its handshake must still prove a node certificate to
// keep the connection past its end; one that proves nothing takes an
// anonymous slot if one is free (a known node may still join again with
// a token), and is closed otherwise. TCP makes the address real; a source
// keeps it through NAT, where the sources behind one address share the
// proven table's per-source cap, as they already do.
type known struct {
	at map[string]time.Time // source → when it was last known
}

// knowLocked records src as known now. When MaxKnown sources are known,
// the one known longest ago is forgotten first.
func (l *Limiter) knowLocked(src string) {
	if l.known.at == nil {
		l.known.at = map[string]time.Time{}
	}

	now := l.cfg.Clock.Now()

	if _, ok := l.known.at[src]; !ok && len(l.known.at) >= MaxKnown {
		oldest, first := "", time.Time{}

		for s, at := range l.known.at {
			if oldest == "" || at.Before(first) {
				oldest, first = s, at
			}
		}

		delete(l.known.at, oldest)
	}

	l.known.at[src] = now
}

// knownLocked reports whether src was known within KnownFor.
func (l *Limiter) knownLocked(src string) bool {
	at, ok := l.known.at[src]
	if ok && l.cfg.Clock.Now().Sub(at) > KnownFor {
		delete(l.known.at, src)

		return false
	}

	return ok
}

// Know records the source of addr as known: the server has given it a
// credential that its next connections will prove in their handshake (a
// node certificate naming the address). A Limiter without a proven table
// knows nobody.
func (l *Limiter) Know(addr net.Addr) {
	if l.cfg.ProvenTotal == 0 || addr == nil {
		return
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	l.knowLocked(sourceOf(addr))
}

// claimLocked reports whether a newcomer of src does its handshake in the
// room as a known source: src is known and the proven table has room for
// it. A known handshake is never displaced from the room.
//
// Strikes against a known source do not take its place away: they are
// most often its own handshakes evicted, or expired, while thousands of
// nodes reconnected to a loaded server, and a node locked out for them
// would reconnect as a stranger, be evicted again, and stay locked out (at
// 5,000 workers, most of trustd's 200 evictions a second). The room's
// per-source cap bounds what a known source holds there, and a suspect
// known source's handshake that proves nothing takes no stranger's slot
// (settle).
func (l *Limiter) claimLocked(src string) bool {
	return l.cfg.ProvenTotal > 0 && l.knownLocked(src) && l.provenRoomLocked(src)
}

// strangersInRoomLocked counts the handshakes of the room that are not of
// known sources: HandshakeRoom bounds them.
func (l *Limiter) strangersInRoomLocked() int { return l.room.strangers.Len() }

// Known reports whether the source of addr is known now.
func (l *Limiter) Known(addr net.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	return l.knownLocked(sourceOf(addr))
}
