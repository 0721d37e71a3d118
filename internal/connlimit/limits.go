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
)
