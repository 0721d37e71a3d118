// Package connlimit bounds the connections of a TCP listener, so that no
// client, and no single source of clients, can hold a server's connections
// and keep others out, and so that anonymous connections from however many
// sources cannot keep out the callers a server already serves.
//
// A Limiter wraps a net.Listener. A connection over its source's cap is
// closed at once. When every slot is taken, the newest connection takes the
// slot of one that has made no call (an idle connection, or one whose
// handshake has not begun), which has proved nothing yet; a handshake
// under way at the gate (below) is never cut short, so that its CPU is
// not spent for nothing. Sources whose connections were
// closed for making no call within the last SuspectFor (a flood's, after
// its first round) give theirs first; then, among sources alike, the one
// holding the most connections without a call gives its oldest, and
// between sources holding as many, the one that came to hold that many
// first. A connection that has made a call is never evicted, so a flood
// from any number of addresses churns only its own connections and never
// caps the callers a server keeps (a cluster's nodes, its clients), and a
// newcomer from an address that wasted no slot lately goes last, whatever
// the flood's rate: time for it to finish its handshake and make its call.
// A newcomer that may wait for a slot (Config.SlotWait, with room among
// Config.MaxWaiting waiters) spares the connections of sources that are no
// suspects until they are MinEvictAge old (counted from the start of their
// latest handshake), so that a burst of honest
// clients larger than the table (a join storm) waits rather than evicting
// its own members in their handshakes; a waiter takes a slot as soon as
// one is released, or MinEvictAge into its wait by eviction, and is closed
// when neither came within SlotWait. A newcomer that may not wait evicts
// whatever the age; when every slot holds a connection that made a call,
// or whose handshake is under way, it is closed at once.
// A connection that has started no call within Config.FirstCall is closed,
// whether its TLS handshake finished or not. The Limiter learns of calls
// through its gRPC stats handler (StatsHandler), or MarkCalled for a
// server that is not gRPC.
//
// A server that can tell its own clients from strangers at the end of the
// TLS handshake (a cluster's nodes, by their node certificates) gives its
// gRPC server Limiter.Credentials and sets Config.ProvenTotal: a
// connection proven there leaves the table above for a table of its own
// (ProvenTotal, ProvenPerSource), where it is never evicted and waits
// behind no stranger, so the flood defence never caps how many of its own
// clients a server keeps. Since nobody is proven before the handshake, a
// newcomer that finds every anonymous slot held by a caller, and no place
// in the queue or no slot there within MinEvictAge, does its handshake in
// a room of Config.HandshakeRoom beyond Total (the oldest there giving its
// place to a newcomer, suspects getting none); one that proves nothing is
// closed at its end unless an anonymous slot came free, and is a strike
// against its source. A newcomer from a known source (one that proved
// itself before, or that the server marked with Know, as trustd does for
// the address a node certificate it signed names) does its handshake in
// the room without taking a stranger's place and without giving its own
// to anyone, within the proven table's caps: its address picks the queue
// and authorizes nothing; its handshake must still prove itself.
//
// A server whose handshakes are mostly CPU (TLS) sets Config.MaxHandshakes:
// at most that many handshakes through Credentials are under way at once,
// the others waiting, admitted and unread, for a place, so that a burst
// larger than the CPU can serve within the handshake deadline finishes the
// handshakes it starts instead of none (gate.go).
//
// Memory stays bounded by the caps: a connection costs one entry in the
// table and one timer goroutine while it holds a slot, a waiter its socket
// and a timer, a suspect source one entry of at most MaxSuspects, and
// nothing is kept of a connection once it is closed.
//
// What belongs to gRPC stays there: the deadline of the TLS handshake and
// HTTP/2 preface (grpc.ConnectionTimeout) and the graceful close of a
// connection idle after its calls (keepalive MaxConnectionIdle).
package connlimit
