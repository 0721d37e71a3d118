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
	// Ref is the reference an Internal answer carries instead of its
	// cause: the one log line with the cause has it too.
	Ref = "ref"
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
)

// General fields.
const (
	// Error is an error's text.
	Error = "error"
	// Stack is a goroutine's stack, logged with a recovered panic.
	Stack = "stack"
	// Node is a target node of a routed call.
	Node = "node"
	// Address is a listening address.
	Address = "address"
	// Socket is a Unix socket's path.
	Socket = "socket"
	// Endpoint is a remote endpoint dialed.
	Endpoint = "endpoint"
	// Paths is the files a watcher reads.
	Paths = "paths"
	// CA is a certificate authority's subject.
	CA = "ca"
	// Log names the stream a record belongs to ("audit").
	Log = "log"
)

// Fields of machined's boot and services.
const (
	// Phase is a boot phase.
	Phase = "phase"
	// ServiceID is a machined service's ID (not a gRPC service).
	ServiceID = "service"
	// State is a service's state.
	State = "state"
	// Message is a service's state or health message.
	Message = "message"
	// Healthy is a service's health.
	Healthy = "healthy"
)
