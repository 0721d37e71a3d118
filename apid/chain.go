package apid

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
)

// interceptors is apid's chain, outermost first: panic recovery, the
// request log line, then authz's three separate steps (authentication,
// role injection, authorization). Streams get the same chain as unary
// calls; apid itself serves only streams (see handle).
func (s *Server) interceptors(rules authz.Rules) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	recoverOpt := recovery.WithRecoveryHandlerContext(s.recovered)
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithDisableLoggingFields(logging.SystemTag[0], logging.ComponentFieldKey, logging.MethodTypeFieldKey),
	}
	authn := authz.NewAuthenticator(authz.AuthenticatorConfig{Logger: s.log, Recheck: s.recheckClient})
	inject := authz.NewInjector(authz.InjectorConfig{Mode: authz.FromCertificate, Logger: s.log})
	authorize := authz.NewAuthorizer(authz.AuthorizerConfig{Rules: rules, Logger: s.log})
	logger := grpcLogger(s.log)

	unary := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(recoverOpt),
		logging.UnaryServerInterceptor(logger, logOpts...),
		authn.UnaryServerInterceptor(),
		inject.UnaryServerInterceptor(),
		authorize.UnaryServerInterceptor(),
	}
	stream := []grpc.StreamServerInterceptor{
		recovery.StreamServerInterceptor(recoverOpt),
		logging.StreamServerInterceptor(logger, logOpts...),
		authn.StreamServerInterceptor(),
		inject.StreamServerInterceptor(),
		authorize.StreamServerInterceptor(),
	}

	return unary, stream
}

// recovered logs a panic with its stack and answers Internal; the caller
// learns nothing about apid's insides.
func (s *Server) recovered(ctx context.Context, p any) error {
	log := func(msg string, args ...any) { s.log.ErrorContext(ctx, msg, args...) }

	return s.internal(log, "panic serving a call", slog.String(logkey.Error, fmt.Sprint(p)),
		slog.String(logkey.Stack, string(debug.Stack())))
}
