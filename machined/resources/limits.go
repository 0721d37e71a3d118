package resources

import "time"

// Limits of the resource sockets, in one place.
const (
	// MaxWatches is the streams one connection to a resource socket may
	// hold at once, as machined announces it in HTTP/2. The service that
	// owns the socket keeps one Watch open; a few more cover a reconnect
	// overlapping the old stream, and further ones wait rather than make
	// machined hold a follow each.
	MaxWatches = 4

	// FirstUpdateTimeout bounds a service's wait for machined's first
	// complete set of resources (Follow). machined starts apid and trustd
	// only once it has them and sends them as soon as the service
	// connects, so a minute without is a broken node, not a slow one.
	FirstUpdateTimeout = time.Minute
)
