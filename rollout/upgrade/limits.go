package upgrade

import "time"

// Timings of an upgrade, in one place.
const (
	// DefaultNodeTimeout bounds, per node, the delivery of the bundle and
	// then the wait from its Upgrade call until it reports the target
	// version and is healthy: a node restarts its services in seconds, and
	// one that is not healthy in time rolls back by itself; five minutes
	// leaves room for a slow upload and for etcd catching up.
	DefaultNodeTimeout = 5 * time.Minute

	// DefaultInterval is the pause between two checks of the nodes being
	// waited on: often enough to see a node come back, rarely enough to be
	// no load on the endpoint.
	DefaultInterval = time.Second

	// UploadChunk is the size of one message of a bundle upload: half the
	// node's bound on a chunk (machineapi.MaxUploadChunk, 1 MiB), so that
	// every hop stays well under gRPC's 4-MiB message bound.
	UploadChunk = 512 << 10
)
