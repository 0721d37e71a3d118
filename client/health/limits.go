package health

import "time"

// Timings of a wait, in one place.
const (
	// DefaultTimeout is how long a caller waits by default: a local
	// cluster is up in seconds, a node rebooting in well under a minute.
	DefaultTimeout = 5 * time.Minute

	// DefaultInterval is the pause between two rounds of checks: often
	// enough to see a node come up, rarely enough to be no load.
	DefaultInterval = time.Second

	// DefaultCallTimeout bounds one round's calls, so a node that hangs
	// shows as not answering instead of stalling the wait.
	DefaultCallTimeout = 10 * time.Second
)
