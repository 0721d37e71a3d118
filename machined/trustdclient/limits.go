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
)
