package trustd

import (
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/refusals"
)

// Limits and defaults of the trustd server, in one place.
const (
	// MaxCertTTL is the longest lifetime of a node certificate. Nodes renew
	// at half-life, so a day bounds how long a stolen node key stays useful
	// without making renewal a busy loop.
	MaxCertTTL = 24 * time.Hour

	// MinCertTTL is the shortest lifetime a node certificate may be given.
	// Short lifetimes exist for tests of renewal; below a minute, the
	// backdating for clock skew and the renewal at half-life leave no time
	// for a retry.
	MinCertTTL = time.Minute

	// MaxRequestSize is gRPC's receive limit for one request message: a
	// CSR at ca's PEM limit plus the protobuf framing. A larger message is
	// refused by gRPC itself before the handler runs (ResourceExhausted),
	// so a 10 MB CSR never reaches memory beyond its 5-byte length prefix.
	// A CSR between ca.MaxPEMSize and this bound reaches the handler and is
	// refused with InvalidArgument.
	MaxRequestSize = ca.MaxPEMSize + 1024

	// MaxHeaderListSize bounds a request's metadata. The token and gRPC's
	// own headers fit in well under 1 KiB.
	MaxHeaderListSize = 16 << 10

	// MaxConcurrentStreams bounds the calls in flight on one connection. A
	// joining node makes one call; a few allow a client's retries.
	MaxConcurrentStreams = 16

	// MaxConnections bounds the open connections. Each costs a TLS
	// handshake and buffers; a cluster's nodes need far fewer, and the
	// bound keeps a flood from exhausting memory.
	MaxConnections = 512

	// HandshakeTimeout bounds a connection's TLS handshake, so a client
	// that connects and says nothing releases its slot.
	HandshakeTimeout = 10 * time.Second

	// MaxIdle closes a connection with no calls for this long: joining
	// nodes call once and leave.
	MaxIdle = 5 * time.Minute

	// RequestTimeout bounds the work on one request (token store access
	// and signing).
	RequestTimeout = 30 * time.Second

	// StopTimeout bounds the wait for calls in flight when the server
	// stops; after it they are cut.
	StopTimeout = 10 * time.Second

	// DefaultFailureBurst is how many failed requests (bad token or bad
	// CSR) a source may make in a row before it is refused.
	DefaultFailureBurst = 10

	// DefaultFailureRefill forgives one failure per interval: a source
	// locked out may try again about every 6 seconds, which makes guessing
	// a token's 82-bit secret hopeless and a misconfigured node's retries
	// harmless.
	DefaultFailureRefill = 6 * time.Second

	// DefaultMaxSources bounds the sources the rate limiter tracks, about
	// a megabyte of buckets. Only sources that failed take a slot; when the
	// table is full, the source whose last failure is the oldest is
	// forgotten, never a source that has not failed penalized. A flood
	// from more addresses than this can thus retry sooner than the refill
	// allows; with a token's 82-bit secret that gains a guesser nothing,
	// while a shared penalty would lock out every honest joiner.
	DefaultMaxSources = 10000

	// RefusalInterval is how long the refusals of a source are counted
	// before their summary is written; the first of each interval is
	// written in full. Under a sustained flood a source costs two lines a
	// minute, whatever its rate.
	RefusalInterval = refusals.DefaultInterval

	// MaxRefusalSources bounds the sources whose refusals are counted apart
	// in one interval; the refusals of further sources are counted in one
	// summary of "other" sources. It bounds both the memory of the counts
	// and the lines a flood from many addresses writes per interval
	// (at most two per source plus one), about 500 KiB.
	MaxRefusalSources = 1024

	// AuditFileSize and AuditFilesKept are the rotation of the file of
	// issuance records (cmd/trustd): a record takes about 320 bytes, so the
	// eleven files keep the last 500,000 issuances or so, months of
	// renewals of a large cluster. Refusals have their own file, so only
	// issuances (and token management) age these out.
	AuditFileSize  = 16 << 20
	AuditFilesKept = 10

	// RefusalsFileSize and RefusalsFilesKept are the rotation of the file
	// of refusals: aggregated, a flood writes at most about 500 KiB per
	// RefusalInterval (2,049 lines of some 240 bytes), so this keeps the
	// last quarter of an hour of the worst flood and days of ordinary
	// failures.
	RefusalsFileSize  = 4 << 20
	RefusalsFilesKept = 1

	// requestIDSize is the size of the random reference in audit records
	// and internal errors, in bytes.
	requestIDSize = 8
)
