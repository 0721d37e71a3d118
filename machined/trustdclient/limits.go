package trustdclient

// Limits of a Client.
const (
	// MaxEndpoints bounds the endpoints a Client is given, and so the
	// connections it keeps (one per endpoint). A cluster has an odd number of
	// control planes for etcd's quorum, seven at most in practice; a few
	// names or addresses for each still fit.
	MaxEndpoints = 32
)
