package trustdclient

import "time"

// Limits of a Client.
const (
	// MaxEndpoints bounds the endpoints a Client is given, and so the
	// connections it keeps (one per endpoint). A cluster has an odd number of
	// control planes for etcd's quorum, seven at most in practice; a few
	// names or addresses for each still fit.
	MaxEndpoints = 32

	// KeepaliveTime and KeepaliveTimeout: while a call is open (a worker's
	// revocation watch is, always) the client pings trustd after this much
	// silence and drops the connection when no answer comes within the
	// timeout, so a watch on a control plane that vanished without closing
	// its connections (a machine powered off) moves to the next endpoint
	// within 40 s rather than never; a process killed closes them, and the
	// watch moves at once. trustd permits pings this often
	// (trustd.MinPingInterval). 10,000 workers send some 330 pings a second
	// in all, a frame each, against the 10,000 polls they replace.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second

	// ProbeInterval is how long an endpoint that failed goes after the
	// others before a call probes it again, jittered to half of it either
	// way. It bounds how long a node stays away from its own control plane
	// once that is back (15 s at most), and spreads the nodes' return: a
	// control plane that comes back under 3,000 workers takes their
	// handshakes (about 1 ms of CPU each) at some 300 a second rather than
	// all at once. While it is down, it costs each of its nodes one
	// failed connection per interval.
	ProbeInterval = 10 * time.Second

	// MaxProbeInterval caps the interval of an endpoint that failed again
	// and again: each failure in a row doubles its interval from
	// ProbeInterval, an answer resets it. A probe costs the node, and the
	// control plane it reaches, a handshake; were every failed probe
	// followed by another ProbeInterval later, a control plane too loaded
	// to finish handshakes in time would be sent more of them the longer
	// it failed (a hollow-node run of 5,000 workers stuck at some 1,000
	// failed handshakes a second that way). Doubling makes the probes of
	// a control plane that keeps failing fewer, down to one a minute per
	// node that lost it (some 55 a second from the 3,333 of 10,000 nodes
	// that prefer one of three, against 333), while a node whose control
	// plane comes back after a long outage returns to it within 90 s at
	// most (MaxProbeInterval, jittered), after a short one within 15 s as
	// before.
	MaxProbeInterval = time.Minute

	// ProbeTimeout bounds a probe's wait for its connection when no TLS
	// handshake has begun on it (TCP did not connect): a control plane that
	// does not answer (still starting, or cut off) delays a node's call
	// this much at most, once per probe, before the call goes on to the
	// next endpoint. A handshake with a live trustd takes milliseconds. The
	// call itself is not bounded, so a stream held open is not cut.
	ProbeTimeout = 2 * time.Second

	// ProbeHandshakeTimeout bounds a probe's wait for a connection whose
	// TLS handshake has begun: the control plane answered, and is busy.
	// Moving on at ProbeTimeout would throw that handshake away, its CPU
	// spent on both sides, and the next probe would start another; the
	// busier the control plane, the more of them. trustd ends a handshake
	// that runs past its own HandshakeTimeout (5 s), so waiting as long
	// costs the call no more than the handshake itself; a probe that still
	// fails closes its connection, which leaves no half-made connection
	// holding a slot of trustd's until its first-call deadline.
	ProbeHandshakeTimeout = 5 * time.Second

	// SlowFor is how long an endpoint whose connection is up may answer
	// calls too late for them, or refuse them as unavailable for now,
	// before the node takes it for failed and moves to the next. A control
	// plane that is up but slow is most often slow for a reason every
	// control plane shares: etcd electing a leader, or a new leader
	// catching up, after a control plane was killed. Moving at the first
	// late answer sent each node whose heartbeat waited to another
	// control plane that shared the trouble,
	// with a TLS handshake on both sides: after a kill under 10,000
	// hollow workers, the two control planes left took some 33 such late
	// heartbeats a second each, their nodes fled from one to the other,
	// and the moves' handshakes kept the cluster from recovering for
	// minutes (8,515 workers unserved after 3 minutes). A heartbeat
	// interval (10 s) keeps a node whose control plane stays slow (its
	// etcd cut off, a process wedged) within the lease of its entry (3
	// intervals): it moves after its second or third late heartbeat. A
	// connection that breaks fails the endpoint at once, as before.
	SlowFor = 10 * time.Second

	// RetireGrace is how long a retired connection (replaced after a
	// renewal, or to an endpoint the node moved from) stays open for the
	// calls under way on it: twice the longest a heartbeat waits
	// (membership's call timeout, 5 s). A stream held open (the
	// revocation watch) is cut then and opened again, from the revision
	// the node has, on the connection the node keeps. Kept longer, every
	// worker of a control plane that failed would hold a connection to
	// the one it moved to as long as its watch ran there (up to trustd's
	// WatchLifetime, ten minutes) on top of the one to its own once back,
	// and a renewal would double a node's connections until its old
	// certificate expired: a hollow-node run of 5,000 workers ended a
	// failover with 2.7 connections at the control planes per worker.
	RetireGrace = 10 * time.Second
)
