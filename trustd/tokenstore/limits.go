package tokenstore

import (
	"github.com/aegis-os/aegis/sanpolicy"
)

// Limits of a token store, in one place.
const (
	// DefaultMaxRecords bounds the records of one store, expired and revoked
	// ones included (they stay listed until pruned). A cluster joins nodes
	// by the dozen, not the thousand; the bound keeps a runaway script from
	// filling the node's disk or making List unbounded.
	DefaultMaxRecords = 1000

	// MaxDescriptionLength bounds a record's description: a sentence for
	// the operator, not a document.
	MaxDescriptionLength = 256

	// MaxAllowedSANs bounds the allowed-SAN patterns of a record, the same
	// bound the policy parser applies.
	MaxAllowedSANs = sanpolicy.MaxPatterns

	// MaxRecordSize bounds one encoded record. The largest legal record
	// (all patterns at full length) is about 20 KiB; anything larger read
	// back from storage is corrupt and is refused before it is decoded.
	MaxRecordSize = 64 << 10

	// SaltSize is the size of the per-token salt in bytes.
	SaltSize = 16
)
