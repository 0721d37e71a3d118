package apid

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Field names of apid's log records. The request log line is written by
// go-grpc-middleware's logging interceptor, whose names these are; roles
// are added to it by the role injector.
const (
	// FieldService and FieldMethod name the called method.
	FieldService = logkey.Service
	FieldMethod  = logkey.Method
	// FieldPeer is the caller's address.
	FieldPeer = logkey.Peer
	// FieldRoles is the caller's roles.
	FieldRoles = authz.FieldRoles
	// FieldCode is the gRPC status code of the call.
	FieldCode = logkey.Code
	// FieldDuration is the call's duration in milliseconds.
	FieldDuration = logkey.Duration
	// FieldNode is a target node of a routed call.
	FieldNode = logkey.Node
	// FieldError is an error's text.
	FieldError = logkey.Error
	// FieldSubject is the subject of a client certificate.
	FieldSubject = authz.FieldSubject
	// FieldStack is a goroutine's stack, logged with a recovered panic.
	FieldStack = logkey.Stack
)

// grpcLogger adapts an slog.Logger to go-grpc-middleware's logging
// interceptor; its levels are slog's.
func grpcLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
