package resources

// Limits of the resource sockets, in one place.
const (
	// MaxWatches is the streams one connection to a resource socket may
	// hold at once, as machined announces it in HTTP/2. The service that
	// owns the socket keeps one Watch open; a few more cover a reconnect
	// overlapping the old stream, and further ones wait rather than make
	// machined hold a follow each.
	MaxWatches = 4
)
