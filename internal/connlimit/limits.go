package connlimit

import "time"

// Limits of the package itself; the caps of each server are in its own
// limits.go.
const (
	// RefusalLogInterval is the least time between two log records of
	// refused connections. A flood refuses thousands of connections a
	// second; one record per interval says how many and from where without
	// letting the flood fill the log.
	RefusalLogInterval = 10 * time.Second
	// MaxLingering bounds the connections closed gracefully at once (see
	// LingerTimeout); beyond it a connection is closed at once, as before,
	// so a flood of failed handshakes holds at most this many sockets a
	// little longer.
	MaxLingering = 64
	// LingerTimeout bounds how long a connection closed before its first
	// call is drained after its write side is shut. A TLS 1.3 client
	// sends its first data right behind its certificate; were the server to
	// close with that data unread, the kernel would answer with a reset,
	// which can reach the client before the server's alert ("bad
	// certificate", a revoked or untrusted client certificate) and leave it
	// with "broken pipe" instead of the reason. Shutting the write side and
	// draining lets the alert arrive, followed by an orderly end.
	LingerTimeout = 500 * time.Millisecond
	// SuspectFor and SuspectStrikes: a source whose connections were
	// closed for making no call (evicted from a full table, or past their
	// FirstCall) twice, each within a minute of the one before, is a
	// suspect, whose connections are evicted before any other's, until it
	// makes a call or a minute passes without a strike. A flood's sources
	// are struck again at every round; a client evicted once in its
	// handshake by a flood's first round is not a suspect, and one that
	// got through once is trusted again.
	SuspectFor     = time.Minute
	SuspectStrikes = 2
	// MaxSuspects bounds the suspects kept: a flood from more addresses
	// than this has its oldest strikes forgotten (some 100 bytes each, so
	// under a megabyte in all), which only lets those sources compete with
	// newcomers again as they would without the set.
	MaxSuspects = 8192
	// MinEvictAge is how old a connection without a call, of a source
	// that is no suspect, must be before a newcomer that may wait for a
	// slot (Config.SlotWait, with room in the queue) takes its slot rather
	// than waiting. A join storm larger than the table makes its calls
	// within a second; evicting its members in their handshakes made a
	// quarter of a 1,000-node storm retry. A newcomer that may not wait
	// takes the slot whatever its age, so a flood that fills the queue too
	// cannot keep newcomers out.
	MinEvictAge = time.Second
	// KnownFor is how long a source stays known (known.go) after its last
	// proof: a node certificate lives a day at most, and a node that
	// renews proves itself again.
	KnownFor = 24 * time.Hour
	// MaxKnown bounds the sources kept known: every node of a cluster of
	// the 10,000 Aegis is measured with, a time and an address each (some
	// 100 bytes, under 2 MiB in all); beyond it the one known longest ago
	// is forgotten, and its next connection is a stranger's again.
	MaxKnown = 16384
	// GateEvictAge is how long a stranger's handshake may hold its place at
	// the handshake gate (Config.MaxHandshakes) while another waits. A
	// handshake costs each side a millisecond or two of CPU and a round
	// trip; with the gate keeping few under way, two seconds pass only for
	// a client that stalls, or one so starved that its handshake would not
	// finish anyway.
	GateEvictAge = 2 * time.Second
	// maxLingerRead bounds what one graceful close reads and discards.
	maxLingerRead = 64 << 10
)
