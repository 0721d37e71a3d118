package machineapi

// Limits of machined's API socket, in one place.
const (
	// MaxCalls bounds the calls machined serves at once on its API socket,
	// Logs and Events follows included, and is what it announces in HTTP/2
	// as the streams one connection may open. Its caller is the node's
	// apid, which holds at most 1024 calls open (apid.MaxStreams) however
	// many clients it serves; a quarter more leaves room for the calls of
	// an apid that was restarted and whose old connection is still
	// closing. A follow costs machined a goroutine, its stream's state and
	// at most one flow-control window (64 KiB) of data not yet taken, so
	// this keeps follows under about 100 MiB whatever apid lets through.
	MaxCalls = 1280

	// ReclaimAfter is the open calls from which, once they are mostly
	// closed again, machined hands the memory they took back to the
	// system (internal/reclaim).
	ReclaimAfter = 256
)
