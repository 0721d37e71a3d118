package authz

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// AuthorizerConfig configures an Authorizer.
type AuthorizerConfig struct {
	// Rules is the method table. Nil means DefaultRules(). It is copied:
	// changing the map afterwards changes nothing.
	Rules Rules
	// Logger receives the audit record of every denial. Nil discards.
	Logger *slog.Logger
}

// Authorizer is the last of the three interceptors: it checks the roles in
// the context against the rules. A call with no roles in its context, a
// method without a rule and a stream are all handled like any refused
// unary call: nothing fails open.
type Authorizer struct {
	rules Rules
	log   *slog.Logger
}

// NewAuthorizer returns an Authorizer.
func NewAuthorizer(cfg AuthorizerConfig) *Authorizer {
	rules := cfg.Rules
	if rules == nil {
		rules = DefaultRules()
	}

	return &Authorizer{rules: rules.Clone(), log: defaults.Logger(cfg.Logger)}
}

// UnaryServerInterceptor authorizes unary calls.
func (a *Authorizer) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return unaryInterceptor(a.authorize)
}

// StreamServerInterceptor authorizes streams when they open.
func (a *Authorizer) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return streamInterceptor(a.authorize)
}

func (a *Authorizer) authorize(ctx context.Context, method string) (context.Context, error) {
	roles, ok := RolesFromContext(ctx)
	if !ok {
		a.log.Error("call refused", slog.String(logkey.Method, method), slog.String(logkey.Error, ErrNoRoles.Error()))

		return nil, grpcError(ErrNoRoles)
	}

	if err := a.rules.Check(method, roles); err != nil {
		var denied *DeniedError
		if errors.As(err, &denied) {
			a.log.Warn("permission denied", slog.String(logkey.Method, method), slog.String(logkey.Roles, roles.String()),
				slog.String(logkey.Allowed, strings.Join(denied.Allowed.Strings(), ",")),
				slog.String(logkey.Subject, subject(ctx)), slog.Bool(logkey.Impersonated, Impersonated(ctx)))
		}

		return nil, grpcError(err)
	}

	return ctx, nil
}

func subject(ctx context.Context) string {
	if c, ok := PeerCertificate(ctx); ok {
		return c.Subject.String()
	}

	return ""
}
