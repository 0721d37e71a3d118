package connlimit

import "time"

// Limits of the package itself; the caps of each server are in its own
// limits.go.
const (
	// IPv6SourceBits is the prefix of an IPv6 address that names one
	// source. A single host is usually handed a whole /64, so counting
	// addresses would let it open its connections from as many addresses as
	// it likes.
	IPv6SourceBits = 64

	// RefusalLogInterval is the least time between two log records of
	// refused connections. A flood refuses thousands of connections a
	// second; one record per interval says how many and from where without
	// letting the flood fill the log.
	RefusalLogInterval = 10 * time.Second
)
