package rotation

import "time"

// Limits and timings of the rotation record.
const (
	// MaxRecordSize bounds a recorded rotation, in bytes: two CA
	// certificates and a few names, a few kilobytes; the bound keeps a
	// caller from filling etcd through Put.
	MaxRecordSize = 64 << 10

	// MaxStartedBy bounds the name of who started a rotation, in bytes: a
	// certificate subject, not a document.
	MaxStartedBy = 512

	// DefaultTimeout bounds one etcd operation: a control plane without
	// quorum answers Unavailable quickly rather than hang the rotation.
	DefaultTimeout = 5 * time.Second

	// DefaultPrefix is where the records live in etcd, one key per CA kind.
	DefaultPrefix = "/aegis/rotation/"
)
