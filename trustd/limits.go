package trustd

import (
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/refusals"
)

// Limits and defaults of the trustd server, in one place.
const (
	// MaxCertTTL is the longest lifetime of a node certificate. Nodes renew
	// at half-life, so a day bounds how long a stolen node key stays useful
	// without making renewal a busy loop.
	MaxCertTTL = 24 * time.Hour

	// MinCertTTL is the shortest lifetime a node certificate may be given.
	// Short lifetimes exist for tests of renewal; below a minute, the
	// backdating for clock skew and the renewal at half-life leave no time
	// for a retry.
	MinCertTTL = time.Minute

	// MaxRequestSize is gRPC's receive limit for one request message: a
	// CSR at ca's PEM limit plus the protobuf framing. A larger message is
	// refused by gRPC itself before the handler runs (ResourceExhausted),
	// so a 10 MB CSR never reaches memory beyond its 5-byte length prefix.
	// A CSR between ca.MaxPEMSize and this bound reaches the handler and is
	// refused with InvalidArgument.
	MaxRequestSize = ca.MaxPEMSize + 1024

	// MaxHeaderListSize bounds a request's metadata. The token and gRPC's
	// own headers fit in well under 1 KiB.
	MaxHeaderListSize = 16 << 10

	// MaxConcurrentStreams bounds the calls in flight on one connection. A
	// joining node makes one call; a few allow a client's retries.
	MaxConcurrentStreams = 16

	// MaxConnections bounds the open connections of anonymous callers
	// (see MaxNodeConnections for the nodes'). Each costs a TLS
	// handshake and buffers; a cluster's nodes need far fewer, and the
	// bound keeps a flood from exhausting memory. When every slot is taken
	// a new connection takes the slot of the oldest one that has made no
	// call (see internal/connlimit), never of one that has: a flood from
	// any number of sources churns its own connections, while joining
	// nodes get a slot and keep it once they call.
	MaxConnections = 512

	// MaxNodeConnections bounds the open connections of the cluster's own
	// nodes: those whose client presented a node certificate of an
	// accepted CA in the handshake. They are counted apart from
	// MaxConnections, which bounds anonymous callers (joins with a token,
	// and floods), so no flood caps the cluster's size and no node waits
	// behind strangers. Each worker keeps one connection, to its preferred
	// control plane while that answers (trustdclient): a control plane
	// holds its share of the workers, and when one of three fails, the
	// two left hold half of them each. 6,144 hold half of the 10,000
	// workers Aegis is measured with, and the connections that replace
	// others for a few seconds after a renewal or a move (RetireGrace);
	// with 4,096 a failover under 10,000 workers left 900 at each of the
	// two counted as anonymous, evicted and refused. A full table costs
	// trustd MaxNodeConnections × NodeConnectionMemory (384 MiB), which
	// its container is sized for (MemoryAtFullTables). A proven
	// connection over this bound is counted as an anonymous one.
	MaxNodeConnections = 6144

	// NodeConnectionMemory is what one kept node connection costs trustd,
	// with the revocation watch every worker holds open on it: 51 KiB in
	// BenchmarkNodeConnectionMemory/watch (31 KiB of heap: the TLS state
	// and the parsed certificate, HTTP/2's framer and header tables; 20 KiB
	// of stacks: gRPC's reader, writer and keepalive goroutines and the
	// watch's), 56 KiB in a hollow-node run of 2,000 workers, whose
	// heartbeats fill the header tables further. Rounded up.
	NodeConnectionMemory = 64 << 10

	// ConnectionMemory is what an anonymous connection (a join with a
	// token) costs trustd while it is open: 37 KiB for one that made a
	// call (BenchmarkNodeConnectionMemory/call), rounded up.
	ConnectionMemory = 48 << 10

	// IdleMemory is trustd's own memory with no connection open: 43 MiB
	// of RSS, most of it the binary's code and tables.
	IdleMemory = 43 << 20

	// MemoryAtFullTables is what trustd holds live with every table of
	// connections full (454 MiB): machined sizes trustd's memory limit
	// from it, with room for the collector above it. The limit of apid's
	// container held it once, when a node connection was thought to cost
	// 38 KiB (measured without the watch) and live memory at 94 % of
	// GOMEMLIMIT was taken for room: a hollow-node run of 5,000 workers
	// sat there, and once a control plane was killed the two left spent
	// four fifths of their CPU collecting, while hundreds of their
	// workers' certificates expired unrenewed.
	MemoryAtFullTables = IdleMemory + MaxNodeConnections*NodeConnectionMemory +
		(MaxConnections+HandshakeRoom)*ConnectionMemory

	// MaxNodeConnectionsPerSource bounds the node connections of one
	// source: a node has one address and keeps one connection, plus the one
	// that replaces it after a renewal while calls end on the old, and one
	// left by a restart until its idle close.
	MaxNodeConnectionsPerSource = 4

	// HandshakeRoom is how many connections may do their handshake beyond
	// MaxConnections when every anonymous slot holds a connection that
	// made a call (anonymous callers keep their slots): the way in for a
	// node that reconnects (trustd restarted, its certificate renewed)
	// whatever strangers hold. A handshake takes milliseconds; one that
	// proves no node certificate is closed at its end, and a source whose
	// handshakes proved nothing twice gets no room for a minute
	// (connlimit.SuspectFor).
	HandshakeRoom = 64

	// MaxHandshakes bounds the TLS handshakes under way at once
	// (internal/connlimit, gate.go): a connection admitted starts its
	// handshake once its client sent its first byte and a place is free,
	// known sources first, suspects last. A join storm, or the nodes of a
	// control plane that came back, bring thousands of handshakes at once;
	// started together they shared the CPU until most outlasted
	// HandshakeTimeout or were evicted as idle, and were made again. A
	// handshake costs trustd a millisecond or two of CPU and a round trip:
	// 64 under way keep two cores busy through the round trips, and
	// finish within a fraction of a second.
	MaxHandshakes = 64

	// MaxConnectionsPerSource bounds the open connections of one source
	// address (an IPv6 /64). A node joins or renews over one connection;
	// 32 lets a few dozen nodes behind one NAT join at once, and keeps one
	// source to a sixteenth of MaxConnections.
	MaxConnectionsPerSource = 32

	// SlotWait is how long a connection may wait for a slot once all
	// MaxConnections hold connections that made a call or are too young
	// to evict (a join storm of more nodes than slots; see
	// connlimit.MinEvictAge), instead of being closed at once and
	// retrying after the client's backoff of 0.5–1 s. Joins end within
	// milliseconds, so slots free quickly; a waiter holds only its socket,
	// and its handshake timeout starts when it gets a slot.
	SlotWait = 2 * time.Second

	// MaxWaiting bounds the connections waiting for a slot: as many again
	// as the slots, a socket each; beyond it they are closed at once.
	MaxWaiting = MaxConnections

	// HandshakeTimeout bounds a connection's TLS handshake and HTTP/2
	// preface, so a client that connects and says nothing releases its
	// slot. Both take one round trip and a signature; seconds are plenty
	// over any network a node joins through.
	HandshakeTimeout = 5 * time.Second

	// FirstCallTimeout closes a connection that has started no call this
	// long after it was accepted (handshake included): a joining node
	// calls as soon as it is connected, and a connection that only holds a
	// slot gives it back within seconds.
	FirstCallTimeout = 10 * time.Second

	// MaxIdle closes a connection with no call open for this long, with a
	// GOAWAY so a call racing the close is not lost: joining nodes call
	// once and leave, and a connection whose calls are done holds a slot
	// for nothing.
	MaxIdle = 30 * time.Second

	// StreamWorkers is how many long-lived goroutines run calls. A call
	// that finds none free starts a goroutine of its own, whose small
	// stack signing and TLS grow again on every call (the runtime's
	// copystack was 3 % of trustd's CPU at saturation with one worker per
	// CPU). Calls now wait for their issuance record's sync, so many are
	// in flight at once; 64 workers keep the grown stacks of that many
	// calls, a few MiB at most, for 8 to 32 callers.
	StreamWorkers = 64

	// ReadBufferSize is gRPC's read buffer per connection: none. crypto/tls
	// already buffers a whole record for each connection, so gRPC's 32 KiB
	// default only added to what every open connection costs; with it, a
	// full table of connections held about a fifth more memory.
	ReadBufferSize = 0

	// WriteBufferSize is gRPC's write buffer per connection
	// (grpcopt.WriteBufferSize, where the reason is): with gRPC's 32 KiB,
	// a revocation pushed to 3,300 workers allocated 104 MiB, beyond the
	// room trustd's heap has between collections (GCRoom), and every
	// trustd collected in the middle of its push.
	WriteBufferSize = grpcopt.WriteBufferSize

	// WindowSize is the HTTP/2 flow-control window of a connection and of
	// each call, fixed. A request is a few KiB at most (MaxRequestSize), so
	// the default 64 KiB never holds one back; a fixed window also turns
	// off gRPC's bandwidth estimator, which pinged the client on the first
	// request data after each answered ping: on calls one after the other,
	// a PING out and its ACK in, each a TLS record and a syscall, on every
	// certificate.
	WindowSize = 64 << 10

	// GCPercent is the garbage collector's target in the trustd binary
	// (GOGC, which overrides it): a collection once the heap has grown
	// by four times what was live after the last. trustd keeps 2–3 MiB
	// live while each certificate allocates some 20 KiB, so at the
	// default of 100 it collected every 60 or so certificates, at about
	// 3 ms of CPU each: 50 µs a certificate, more than its fdatasync.
	// The heap then peaks near 15 MiB instead of 6, far below the
	// GOMEMLIMIT trustd's container runs with. It is the most: GCRoom
	// lowers it while trustd holds more than a quarter of GCRoom.
	GCPercent = 400

	// GCRoom bounds how far trustd's heap grows beyond what it holds
	// between two collections while it allocates little, and GCEvery how
	// often it collects while it allocates more: the room is then what it
	// allocated in GCEvery at its fastest lately (internal/gcroom lowers
	// the GOGC percentage below GCPercent as it holds more). Serving
	// thousands of workers trustd holds 100–300 MiB of heap and stacks
	// (NodeConnectionMemory each); at 400 % its heap grew to the
	// GOMEMLIMIT machined gives it between collections, and its RSS was
	// that limit (545–601 MiB with its share of 10,000 workers), not what
	// it needs. With that share (some 3,300 connections, about 170 MiB
	// held) and its workers' entries held by their connections, it
	// allocates little: 64 MiB of room is a percentage near 38, and RSS
	// came to 285–303 MiB, no more than with 24 MiB (what the storm left
	// spread over the heap's spans stays), while a burst (a revocation
	// pushed to every watch) meets fewer collections. The same fixed room
	// cost each trustd a sixth more CPU while it took 333 heartbeats a
	// second; a join storm is no slower for the room GCEvery gives it.
	GCRoom  = 64 << 20
	GCEvery = 10 * time.Second

	// RequestTimeout bounds the work on one request (token store access
	// and signing).
	RequestTimeout = 30 * time.Second

	// StopTimeout bounds the wait for calls in flight when the server
	// stops; after it they are cut.
	StopTimeout = 10 * time.Second

	// DefaultFailureBurst is how many failed requests (bad token or bad
	// CSR) a source may make in a row before it is refused.
	DefaultFailureBurst = 10

	// DefaultFailureRefill forgives one failure per interval: a source
	// locked out may try again about every 6 seconds, which makes guessing
	// a token's 82-bit secret hopeless and a misconfigured node's retries
	// harmless.
	DefaultFailureRefill = 6 * time.Second

	// DefaultMaxSources bounds the sources the rate limiter tracks, about
	// a megabyte of buckets. Only sources that failed take a slot; when the
	// table is full, the source whose last failure is the oldest is
	// forgotten, never a source that has not failed penalized. A flood
	// from more addresses than this can thus retry sooner than the refill
	// allows; with a token's 82-bit secret that gains a guesser nothing,
	// while a shared penalty would lock out every honest joiner.
	DefaultMaxSources = 10000

	// RefusalInterval is how long the refusals of a source are counted
	// before their summary is written; the first of each interval is
	// written in full. Under a sustained flood a source costs two lines a
	// minute, whatever its rate.
	RefusalInterval = refusals.DefaultInterval

	// MaxRefusalSources bounds the sources whose refusals are counted apart
	// in one interval; the refusals of further sources are counted in one
	// summary of "other" sources. It bounds both the memory of the counts
	// and the lines a flood from many addresses writes per interval
	// (at most two per source plus one), about 500 KiB.
	MaxRefusalSources = 1024

	// AuditFileSize and AuditFilesKept are the rotation of the file of
	// issuance records (cmd/trustd): a record takes about 320 bytes, so the
	// eleven files keep the last 500,000 issuances or so, months of
	// renewals of a large cluster. Refusals have their own file, so only
	// issuances (and token management) age these out.
	AuditFileSize  = 16 << 20
	AuditFilesKept = 10

	// RefusalsFileSize and RefusalsFilesKept are the rotation of the file
	// of refusals: aggregated, a flood writes at most about 500 KiB per
	// RefusalInterval (2,049 lines of some 240 bytes), so this keeps the
	// last quarter of an hour of the worst flood and days of ordinary
	// failures.
	RefusalsFileSize  = 4 << 20
	RefusalsFilesKept = 1

	// MaxRevocationWatchers bounds the revocation Watch streams open at
	// once, one per worker that watches this control plane. Each is a
	// goroutine parked on the feed's channel and an HTTP/2 stream, a few
	// KiB; the list itself is shared, and a watcher holds at most one
	// encoded copy while its send waits for the caller's flow-control
	// window (WindowSize). 10,000 is issue 33's whole cluster on one
	// control plane (the other two down), some 50 MiB; a watcher past it
	// is refused ResourceExhausted and moves to another control plane.
	MaxRevocationWatchers = 10000

	// MaxRevocationWatchersPerSource bounds the Watch streams of one
	// source address, so that one node cannot take the table: a node
	// watches once, and a few more cover broken streams replaced before
	// trustd has seen their end.
	MaxRevocationWatchersPerSource = 4

	// WatchLifetime ends a Watch stream cleanly this long after it opened
	// (or at the caller's certificate expiry, if sooner); the node opens
	// another from the revision it has, and gets nothing when it is
	// current. It bounds how long a stream outlives the check of its
	// certificate at the handshake, and moves a node whose certificate was
	// renewed onto its new connection. 10,000 workers make some 17 new
	// streams a second, each a header exchange without a list.
	WatchLifetime = 10 * time.Minute

	// MinPingInterval is how often a client may ping while it has a call
	// open: a node's watch pings every 30 s (trustdclient.KeepaliveTime)
	// to notice a control plane gone silent; gRPC's default of 5 minutes
	// would close its connection as abusive.
	MinPingInterval = 20 * time.Second

	// PingInterval and PingTimeout: after this much silence on a
	// connection trustd pings the client, and closes the connection when
	// no answer comes within the timeout: a worker whose node vanished
	// without closing its connection gives back its place in
	// MaxRevocationWatchers, and its member entry, held for that
	// connection, leaves the list a grace later, within a minute in all.
	// A worker's own pings (every 30 s while its watch is open) keep a
	// live connection from silence for 30 s at most, so trustd pings it
	// about once every 30 s too: some 110 pings a second per control
	// plane with its share of 10,000 workers, each a small frame.
	PingInterval = 20 * time.Second
	PingTimeout  = 10 * time.Second
)
