package apid

import (
	"time"

	"github.com/aegis-os/aegis/client/routing"
)

// Limits of apid, in one place.
const (
	// MaxMessageSize bounds one gRPC message in either direction, and the
	// merged reply of a fan-out. It is the Talos API's own bound
	// (constants.GRPCMaxMessageSize), so every message a Talos client or
	// machined sends passes, and one call never makes apid hold more than
	// this per message.
	MaxMessageSize = 32 << 20

	// MaxFanOut bounds the nodes of one `nodes` call. Each node costs a
	// connection, two goroutines and a reply held until the merge; 128
	// covers any cluster a person drives with one command, and a larger
	// list is more likely a mistake than a cluster.
	MaxFanOut = 128

	// MaxMetadataSize bounds a call's metadata (HTTP/2 header list), on
	// apid's listener and on every hop it makes. A `nodes` list of
	// MaxFanOut names of MaxTargetLength fits; grpc's default of 16 MiB
	// would let one call make apid parse and copy that much per hop.
	MaxMetadataSize = 64 << 10

	// MaxConnections bounds apid's open connections of callers without a
	// certificate (see MaxCertifiedConnections for the others). Each holds a
	// goroutine, TLS state and gRPC's buffers; a node's clients (operators
	// and the apid of other nodes, one pooled connection each) need a
	// fraction of it, and the bound keeps a flood from exhausting file
	// descriptors and memory. When every slot is taken a new connection
	// takes the slot of the oldest one that has made no call (see
	// internal/connlimit), never of one that has: other nodes and
	// operators keep their connections whatever a flood does.
	MaxConnections = 1024

	// MaxCertifiedConnections bounds the connections whose client
	// presented a certificate the handshake verified: operators and other
	// nodes' apid. They are counted apart from MaxConnections, which then
	// bounds only callers without a certificate (health probes, and
	// floods: a client without a certificate completes the handshake and
	// may call the health service, so anonymous callers could otherwise
	// hold every slot with calls and keep operators and nodes out). Each
	// node forwards over one pooled connection and an operator's command
	// over one, so as many as the anonymous slots is plenty; at some 40
	// KiB a kept connection (as trustd's, docs/internals/trustd.md) a full
	// table is 40 MiB, beside the 150 MiB of MaxStreams' worst case.
	// Each source keeps MaxConnectionsPerSource among them.
	MaxCertifiedConnections = 1024

	// HandshakeRoom is how many connections may do their handshake beyond
	// MaxConnections when every anonymous slot holds a connection that
	// made a call: the way in for an operator or a node whatever
	// anonymous callers hold (internal/connlimit). A handshake that
	// verifies no certificate is closed at its end.
	HandshakeRoom = 64

	// MaxHandshakes bounds the TLS handshakes under way at once
	// (internal/connlimit, gate.go), the others waiting, admitted, for a
	// place, so that a burst of callers larger than the CPU can serve
	// within HandshakeTimeout (a cluster-wide call fanned out to every node
	// at once, a flood) gets its handshakes done one batch after another
	// rather than all of them outlasting their deadline. A handshake costs
	// apid a millisecond or two of CPU and a round trip; 64 keep two cores
	// busy through the round trips.
	MaxHandshakes = 64

	// MaxConnectionsPerSource bounds the open connections of one source
	// address (an IPv6 /64): an operator running many commands at once, or
	// a node forwarding, stays far below it, and one source holds at most a
	// sixteenth of MaxConnections.
	MaxConnectionsPerSource = 64

	// SlotWait is how long a connection may wait for a slot once all
	// MaxConnections hold connections that made a call or are too young to
	// evict (connlimit.MinEvictAge),
	// instead of being closed at once: a burst of short-lived clients
	// waits for the ones ahead of it rather than failing. A waiter holds
	// only its socket, and its handshake timeout starts when it gets a slot.
	SlotWait = 2 * time.Second

	// MaxWaiting bounds the connections waiting for a slot: as many again
	// as the slots, a socket each; beyond it they are closed at once.
	MaxWaiting = MaxConnections

	// HandshakeTimeout bounds the TLS handshake and HTTP/2 preface of a
	// connection; gRPC's default of two minutes let a connection that
	// never sends a ClientHello hold its descriptor that long. The
	// handshake takes one round trip and two signatures.
	HandshakeTimeout = 5 * time.Second

	// FirstCallTimeout closes a connection that has started no call this
	// long after it was accepted (handshake included): clients call as soon
	// as they are connected, and gRPC clients reconnect by themselves when
	// they call later.
	FirstCallTimeout = 10 * time.Second

	// MaxIdle closes a connection with no call open for this long, with a
	// GOAWAY so a call racing the close is retried on a new connection. It
	// is above ConnIdleTimeout, so other nodes' apid let their pooled
	// connections go first.
	MaxIdle = 2 * time.Minute

	// ReadBufferSize is gRPC's read buffer per connection: none. crypto/tls
	// already buffers a whole record for each connection, so gRPC's 32 KiB
	// default only added to what every open connection costs; with it, a
	// full table of connections held about a fifth more memory.
	ReadBufferSize = 0

	// MaxTargetLength bounds one node name in `node`/`nodes`: the longest
	// DNS name, as clients check it too (routing.MaxLength).
	MaxTargetLength = routing.MaxLength

	// MaxPooledNodesPerCaller bounds the pooled connections one caller
	// (one client key) has calls on at once. It is MaxFanOut, so the
	// largest fan-out fits, and no more: a caller naming many nodes, or
	// many that never answer, cannot take the pool from the others.
	MaxPooledNodesPerCaller = MaxFanOut

	// AdminPoolReserve is how many pooled connections only os:admin
	// callers may take: callers without it, however many, hold at most
	// MaxPooledNodes-AdminPoolReserve at once, so an admin's full fan-out
	// always finds room.
	AdminPoolReserve = MaxFanOut

	// MaxPooledNodes bounds the connections to other nodes kept at once:
	// the admins' reserve plus three full fan-outs of other callers.
	// Unused connections make room for new ones, so only connections with
	// calls on them count against it.
	MaxPooledNodes = AdminPoolReserve + 3*MaxPooledNodesPerCaller

	// PoolIdleTimeout is how long a connection to another node stays in the
	// pool unused before it is closed and forgotten, so nodes addressed
	// once do not pin connections and memory forever.
	PoolIdleTimeout = 5 * time.Minute

	// ConnIdleTimeout is how long gRPC keeps the transport of a pooled
	// connection with no call before it lets it go idle; the next call
	// reconnects.
	ConnIdleTimeout = time.Minute

	// NodeConnectTimeout bounds one attempt to connect to another node
	// (TCP and TLS), so a dead node fails a call soon even when the caller
	// set no deadline.
	NodeConnectTimeout = 5 * time.Second

	// HealthRetryMin and HealthRetryMax bound the pause before apid watches
	// machined's health again after the watch broke (machined restarting):
	// short enough that a probe sees the node back within seconds, long
	// enough not to spin on a socket that is gone.
	HealthRetryMin = 200 * time.Millisecond
	HealthRetryMax = 5 * time.Second

	// NodeBackoffMaxDelay caps the wait between reconnects to a node, so a
	// rebooted node is reachable again within seconds rather than gRPC's
	// default two minutes.
	NodeBackoffMaxDelay = 5 * time.Second

	// KeepaliveTime and KeepaliveTimeout: a connection to another node with
	// calls open and nothing received for KeepaliveTime is pinged, and
	// dropped if no answer comes within KeepaliveTimeout. A node that
	// vanished without closing its connections (power loss, kexec) must not
	// hold a Logs or Events follow open forever.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second

	// KeepaliveMinTime is the shortest interval between pings apid accepts
	// from a client. Other nodes ping every KeepaliveTime; a client pinging
	// more often is sent away rather than served.
	KeepaliveMinTime = 10 * time.Second

	// MergeReserveDivisor, MinMergeReserve and MaxMergeReserve: a fan-out
	// gives its nodes the caller's deadline minus a reserve of a tenth of
	// the time left, kept between these bounds. A slow or dead node then
	// times out while there is still time to send the merged reply, with
	// that node's error entry, before the caller gives up.
	MergeReserveDivisor = 10
	MinMergeReserve     = 20 * time.Millisecond
	MaxMergeReserve     = time.Second

	// StreamBuffer is how many messages a streaming fan-out buffers between
	// its nodes and the caller, and a node between the caller's requests
	// and its stream: enough to smooth bursts, small enough that a slow
	// caller holds back its nodes instead of filling apid's memory. A
	// stalled `nodes` Logs follow holds this many 32 KiB chunks: 256 such
	// calls of two nodes each (MaxStreams) hold 32 MiB, where 16 held 128.
	StreamBuffer = 4

	// MaxStreamsPerConnection, MaxStreamsPerIdentity and MaxStreams bound
	// the calls apid holds open at once: on one client connection, for one
	// client key (however many connections it opens), and on the node.
	// Every call is an HTTP/2 stream; Logs and Events follows are the ones
	// that stay open. Each costs apid about 36 KiB (a server stream, a
	// client stream to machined, the goroutine between them), and a follow
	// whose caller stops reading while its log grows holds up to a 64 KiB
	// window from machined, 64 KiB queued towards the caller and a 32 KiB
	// message in hand: about 200 KiB. MaxStreams keeps that worst case near
	// 100 MiB over apid's 20 MiB at idle, under 150 MiB; a flood of follows
	// that are read costs 18 MiB (see docs/benchmarks.md). A `nodes` call
	// counts once per node it reaches against the key's and the node's
	// caps, and once against its connection's: MaxStreamsPerIdentity fits
	// one fan-out to MaxFanOut nodes. MaxStreamsPerIdentity leaves room
	// for three more clients when one opens all it may.
	MaxStreamsPerConnection = MaxFanOut / 2
	MaxStreamsPerIdentity   = MaxFanOut
	MaxStreams              = 4 * MaxStreamsPerIdentity

	// UnaryHeadroom is how many unary calls (Version, ServiceList, …) may
	// still run when open streams fill MaxStreams: a node full of follows
	// stays manageable, and the calls that take it are short.
	UnaryHeadroom = MaxStreamsPerIdentity

	// MaxStreamsPerPeerNode bounds the calls another node forwards at once,
	// over its one pooled connection and under its one certificate: they
	// are the calls of all its clients together, so it gets a larger share
	// than one client. Its clients are capped on that node already.
	MaxStreamsPerPeerNode = MaxStreams / 2

	// MaxConcurrentStreams is what apid announces in HTTP/2 as the streams a
	// connection may open at once. It is above every per-connection cap, so
	// that a call over a cap is answered ResourceExhausted rather than made
	// to wait; a client that ignores it has its extra streams reset by the
	// transport before any handler runs.
	MaxConcurrentStreams = MaxStreams

	// ReclaimAfter is the open streams from which, once they are mostly
	// closed again, apid hands the memory they took back to the system
	// (internal/reclaim): a few megabytes at least, worth a collection.
	ReclaimAfter = MaxStreamsPerIdentity

	// StreamRecheckInterval is how often the chains of open calls are
	// checked again against the accepted CAs, so a follow opened by a
	// client of a CA that a rotation removed ends within it. Expiry needs
	// no polling: each open call's end is timed at its chain's NotAfter.
	StreamRecheckInterval = 5 * time.Second

	// StreamStopGrace is how long Shutdown lets the open streaming calls
	// end by themselves before it ends them, Unavailable (a follow never
	// ends by itself); unary calls keep the whole grace. While apid stops,
	// new connections wait in its listening socket's backlog (machined
	// holds the socket across a restart or a version switch), so what
	// holds the stop holds every new call to the node.
	StreamStopGrace = time.Second

	// WindowSize is the HTTP/2 flow-control window of apid's connections,
	// per stream and fixed (gRPC's minimum). To machined and to other
	// nodes it bounds what apid holds of a follow its caller does not
	// read; gRPC would otherwise grow windows to megabytes on a fast link.
	// On the connections of apid's clients a fixed window also turns off
	// gRPC's bandwidth estimator, which pinged the client on the first
	// request data after each answered ping: a PING out and its ACK in, a
	// TLS record and a system call each, on calls made one after the other.
	WindowSize = 64 << 10

	// ConnWindowSize is the connection's window on the same connections:
	// replenished as data arrives, it bounds only the data in flight.
	ConnWindowSize = 1 << 20

	// HandshakeRefusalInterval is how long the refused TLS handshakes of a
	// source are counted before their summary is logged; the first of each
	// interval is logged in full. A source flooding bad handshakes costs
	// two lines a minute.
	HandshakeRefusalInterval = time.Minute

	// MaxRefusalSources bounds the sources whose refused handshakes are
	// counted apart in one interval; further sources are counted together
	// as "other". It bounds the memory of the counts and the lines a flood
	// from many addresses writes per interval.
	MaxRefusalSources = 1024

	// StreamWorkers is how many long-lived goroutines run calls. A call
	// waits for its backend (machined, or other nodes) in its goroutine, so
	// as many calls are in flight as there are callers; a call that finds
	// no worker free starts a goroutine of its own, whose small stack the
	// interceptor chain, the log line and TLS grow again on every call.
	// With one worker per CPU, at 8 callers the runtime's stack growth
	// (morestack, copystack) was 7–8 % of apid's CPU. 64 workers keep the
	// grown stacks of that many calls, about 2 MiB at most; calls beyond
	// them start goroutines as before.
	StreamWorkers = 64

	// RequestLogInterval is how long a request log line may wait before it
	// is written, together with the lines of the calls around it
	// (internal/logbuf): one write per interval or per RequestLogBuffer,
	// instead of one per call. A crash loses at most this much of the
	// request log; every other line is written at once.
	RequestLogInterval = 100 * time.Millisecond

	// RequestLogBuffer is how many bytes of request log lines wait at most
	// before they are written: about 150 lines of 400 bytes, a few tens of
	// milliseconds of calls at the rates apid reaches on two cores.
	RequestLogBuffer = 64 << 10
)
