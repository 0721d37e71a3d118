// Package logkey names the fields of every Aegis log record, in one place,
// so that one process never writes the same thing under two names and a
// log query written for one component works for the others.
//
// The gRPC names are go-grpc-middleware's, whose logging interceptor
// writes the request line of apid: the records Aegis writes itself use the
// same ones.
package logkey

// Fields of a gRPC call.
const (
	// Service is the called gRPC service.
	Service = "grpc.service"
	// Method is the called gRPC method.
	Method = "grpc.method"
	// Code is the gRPC status code of a call.
	Code = "grpc.code"
	// Duration is a call's duration in milliseconds.
	Duration = "grpc.time_ms"
	// Peer is the caller's network address.
	Peer = "peer.address"
	// StartTime is when a call began (RFC 3339), in apid's request log.
	StartTime = "grpc.start_time"
	// Deadline is a call's deadline (RFC 3339), in apid's request log.
	Deadline = "grpc.request.deadline"
	// GRPCError is the error a call ended with, in apid's request log.
	GRPCError = "grpc.error"
	// RequestID is the random ID of a request: the reference an Internal
	// answer carries instead of its cause, in the one log line that has
	// the cause too.
	RequestID = "request_id"
)

// Fields of a caller's identity and its authorization.
const (
	// Roles is the caller's roles, comma-separated.
	Roles = "roles"
	// Allowed is the roles that would have allowed a denied call.
	Allowed = "allowed"
	// UnknownRoles is role names ignored because nobody knows them.
	UnknownRoles = "unknown_roles"
	// Subject is a client certificate's subject.
	Subject = "subject"
	// Impersonated says whether the roles were passed on by another node.
	Impersonated = "impersonated"
	// CallerSerial and CallerSubject name who made a call: on a call
	// forwarded by another node, the client that node verified.
	CallerSerial  = "caller_serial"
	CallerSubject = "caller_subject"
	// ForwardedBy is the subject of the node that forwarded a call.
	ForwardedBy = "forwarded_by"
)

// General fields.
const (
	// Error is an error's text.
	Error = "error"
	// Stack is a goroutine's stack, logged with a recovered panic.
	Stack = "stack"
	// Panic is the value a recovered panic carried.
	Panic = "panic"
	// Node is a target node of a routed call.
	Node = "node"
	// NodeRole is the role a target node is proven to have
	// ("controlplane", "worker", or "unproven").
	NodeRole = "node_role"
	// SecretsFor is the role the secrets of a refused call are for.
	SecretsFor = "secrets_for"
	// Address is a listening address.
	Address = "address"
	// Socket is a Unix socket's path.
	Socket = "socket"
	// Endpoint is a remote endpoint dialed.
	Endpoint = "endpoint"
	// StateDir is a node's state directory.
	StateDir = "state_dir"
	// Paths is the files a watcher reads.
	Paths = "paths"
	// CA is a certificate authority's subject.
	CA = "ca"
	// Log names the stream a record belongs to ("audit").
	Log = "log"
)

// Fields of certificates, tokens and their audit records.
const (
	// Decision is an audit record's outcome: "issued" or "refused".
	Decision = "decision"
	// TokenID is a bootstrap token's public ID (never its secret).
	TokenID = "token_id"
	// TokenKind is which kind of token a request used: "static",
	// "static-previous" (a previous static token during a rotation's
	// overlap) or "stored".
	TokenKind = "token_kind"
	// Source is the address a request came from.
	Source = "source"
	// CommonName is a certificate's common name.
	CommonName = "common_name"
	// SANs is a certificate's subject alternative names.
	SANs = "sans"
	// Serial is a certificate's serial number, in hex.
	Serial = "serial"
	// NotAfter is the end of a certificate's validity.
	NotAfter = "not_after"
	// TTL is a certificate's lifetime.
	TTL = "ttl"
	// Reason is why a request was refused, as the caller read it; for
	// an upgrade, why the node went back to the version it kept.
	Reason = "reason"
	// Version is an Aegis version, of a release bundle or a slot.
	Version = "version"
	// Slot is the name of a slot of installed versions.
	Slot = "slot"
	// Staged is true when an upgrade waits for machined's next start.
	Staged = "staged"
	// RefusalCode is the gRPC code of a refusal, in audit records.
	RefusalCode = "code"
	// AskingSerial and AskingCommonName are the certificate a renewal
	// was asked with.
	AskingSerial     = "asking_serial"
	AskingCommonName = "asking_common_name"
	// AskingSubject is the subject of the certificate a credential was
	// asked for with, in machined.sock's credential audit records.
	AskingSubject = "asking_subject"
	// AuditedMethod is the method that handed out or withdrew a
	// credential, in machined.sock's credential audit records (their log
	// pipelines match on "method", not on the gRPC request line's Method).
	AuditedMethod = "method"
	// RenewedFrom is the revoked certificate a certificate was renewed
	// from, in the audit record of a revocation that covers it as such.
	RenewedFrom = "renewed_from"
	// Expires is a token's expiry.
	Expires = "expires"
	// MaxUses is how many times a token may be used.
	MaxUses = "max_uses"
	// AllowedSANs is the SANs a token may obtain.
	AllowedSANs = "allowed_sans"
	// Kind is the kind of a held certificate.
	Kind = "kind"
	// OnEtcd says whether trustd's token store is on etcd yet.
	OnEtcd = "on_etcd"
	// Moved is how many token records moved from bbolt to etcd.
	Moved = "moved"
	// LocalRecords is how many token records the local store held.
	LocalRecords = "local_records"
)

// Fields of retries, limits and refusal summaries.
const (
	// Attempt is the number of an attempt.
	Attempt = "attempt"
	// RetryIn is the wait before the next attempt.
	RetryIn = "retry_in"
	// Refused is how many connections were refused.
	Refused = "refused"
	// Listener is the listener a limit applies to.
	Listener = "listener"
	// Count is how many refusals a summary covers.
	Count = "count"
	// Kinds is the kinds of refusal a summary covers.
	Kinds = "kinds"
	// Since is the start of a summary's period.
	Since = "since"
	// Listen is the address a daemon listens on.
	Listen = "listen"
	// Forwarding says whether apid forwards calls to other nodes.
	Forwarding = "forwarding"
	// Grace is a shutdown's grace period.
	Grace = "grace"
)

// Fields of time synchronisation.
const (
	// Server is an NTP server.
	Server = "server"
	// Servers is the NTP servers.
	Servers = "servers"
	// Offset is the clock's offset from a server.
	Offset = "offset"
	// RTT is a round trip's duration.
	RTT = "rtt"
	// Synced is whether the time gate is open.
	Synced = "synced"
	// MaxOffset is the largest offset accepted.
	MaxOffset = "max_offset"
	// Before is a deadline.
	Before = "before"
	// LastError is the last error of a repeated attempt.
	LastError = "last_error"
)

// Fields of machined's boot and services.
const (
	// Phase is a boot phase.
	Phase = "phase"
	// Resource names what a resource of the node's resource API holds.
	Resource = "resource"
	// ServiceID is a machined service's ID (not a gRPC service).
	ServiceID = "service"
	// State is a service's state.
	State = "state"
	// Message is a service's state or health message.
	Message = "message"
	// Healthy is a service's health.
	Healthy = "healthy"
	// EtcdKey is a key in etcd.
	EtcdKey = "etcd_key"
	// Revoked counts the entries of the client-certificate revocation list.
	Revoked = "revoked"
	// MemberID is an etcd member's ID, in hex.
	MemberID = "member_id"
	// ApplyMode is the mode a machine config was applied in.
	ApplyMode = "apply_mode"
	// ConfigFields are the field paths a machine config change touched.
	ConfigFields = "config_fields"
	// RestartWaited is how long an etcd member waited for another
	// member's restart before its own.
	RestartWaited = "restart_waited"
	// DownFor is how long a service was down for a restart.
	DownFor = "down_for"
	// Step is the step of a CA rotation.
	Step = "step"
	// Addresses are a node's addresses, comma-separated.
	Addresses = "addresses"
	// EntryDeleted says whether a node's member entry was deleted.
	EntryDeleted = "entry_deleted"
	// NameReleased says whether a node's name binding was released.
	NameReleased = "name_released"
)
