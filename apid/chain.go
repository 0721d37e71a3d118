package apid

import (
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/grpcrecover"
	"github.com/aegis-os/aegis/internal/healthprobe"
)

// interceptors is apid's chain, outermost first: panic recovery, the
// request log line, then authz's three separate steps (authentication,
// role injection, authorization); the health service skips all but the
// first. Streams get the same chain as unary
// calls; apid itself serves only streams (see handle).
func (s *Server) interceptors(rules authz.Rules) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	// A panic answers Internal with a reference that is also in the log
	// line with the stack; the caller learns nothing of apid's insides.
	recovered := grpcrecover.New(grpcrecover.Config{Component: "apid", Logger: s.log, Rand: s.rand})
	authn := authz.NewAuthenticator(authz.AuthenticatorConfig{Logger: s.log, Recheck: s.recheckCall})
	inject := authz.NewInjector(authz.InjectorConfig{Mode: authz.FromCertificate, Logger: s.log})
	authorize := authz.NewAuthorizer(authz.AuthorizerConfig{Rules: rules, Logger: s.log})
	logger := requestLog{log: s.reqLog}

	// Health probes come without a certificate, often every few seconds:
	// they skip the request log and authz, and reach nothing but the
	// health service.
	unary := append([]grpc.UnaryServerInterceptor{recovered.Unary()}, healthprobe.Unary(
		logger.unary,
		authn.UnaryServerInterceptor(),
		inject.UnaryServerInterceptor(),
		authorize.UnaryServerInterceptor(),
	)...)
	stream := append([]grpc.StreamServerInterceptor{recovered.Stream()}, healthprobe.Stream(
		logger.stream,
		authn.StreamServerInterceptor(),
		inject.StreamServerInterceptor(),
		authorize.StreamServerInterceptor(),
	)...)

	return unary, stream
}
