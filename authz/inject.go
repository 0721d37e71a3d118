package authz

import (
	"context"
	"log/slog"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/wire"
)

// Mode says where an Injector takes roles from.
type Mode int

const (
	// FromCertificate takes roles from the Organization of the client
	// certificate that the Authenticator verified. A peer whose certificate
	// holds os:impersonator (another node's apid) passes the caller's roles
	// in talos-role metadata instead. Any other peer's talos-role metadata is
	// ignored: it gains nothing and is logged. This is apid's mode, and the
	// zero value, so a forgotten setting never trusts metadata.
	FromCertificate Mode = iota

	// FromTrustedMetadata takes roles from talos-role metadata alone, with no
	// certificate. It is only for a listener nobody but apid can reach, such
	// as machined's Unix socket (mode 0600, owned by apid's user): there apid
	// has authenticated the caller and passes its roles on. A call without
	// talos-role metadata has no role and is allowed nothing.
	FromTrustedMetadata
)

// InjectorConfig configures an Injector.
type InjectorConfig struct {
	// Mode is where roles come from. Zero means FromCertificate.
	Mode Mode
	// Logger receives a record for ignored role names and metadata. Nil discards.
	Logger *slog.Logger
}

// Injector is the second of the three interceptors: it decides the caller's
// roles and puts them in the context (see RolesFromContext) for the
// authorizer. It also adds them to go-grpc-middleware's logging fields, so
// the request log line names them.
type Injector struct {
	mode Mode
	log  *slog.Logger
}

// NewInjector returns an Injector.
func NewInjector(cfg InjectorConfig) *Injector {
	return &Injector{mode: cfg.Mode, log: defaults.Logger(cfg.Logger)}
}

// UnaryServerInterceptor injects roles into unary calls.
func (i *Injector) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return unaryInterceptor(i.inject)
}

// StreamServerInterceptor injects roles into streams.
func (i *Injector) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return streamInterceptor(i.inject)
}

func (i *Injector) inject(ctx context.Context, method string) (context.Context, error) {
	var (
		roles        role.Set
		rolesText    string
		impersonated bool
		err          error
	)

	switch i.mode {
	case FromTrustedMetadata:
		roles, err = i.fromMetadata(ctx, method)
	default:
		var facts *certFacts

		facts, roles, impersonated, err = i.fromCertificate(ctx, method)
		if err == nil {
			ctx, err = i.withCaller(ctx, method, facts)
		}

		if err == nil && !impersonated {
			rolesText = facts.rolesText
		}
	}

	if err != nil {
		return nil, grpcError(err)
	}

	ctx = ContextWithRoles(ctx, roles)
	if impersonated {
		ctx = context.WithValue(ctx, impersonatedKey{}, true)
	}

	if rolesText == "" {
		rolesText = roles.String()
	}

	logging.AddFields(ctx, logging.Fields{logkey.Roles, rolesText})

	return ctx, nil
}

// fromCertificate returns the facts of the verified client certificate
// and the call's roles: the certificate's, or for an impersonator those it
// passes in metadata.
func (i *Injector) fromCertificate(ctx context.Context, method string) (*certFacts, role.Set, bool, error) {
	leaf, ok := PeerCertificate(ctx)
	if !ok {
		i.log.Error("call refused: role injection ran without an authenticated peer", slog.String(logkey.Method, method))

		return nil, nil, false, ErrUnauthenticated
	}

	facts := factsOf(ctx, leaf)
	if len(facts.unknown) > 0 {
		i.log.Warn("unknown roles in client certificate ignored", slog.String(logkey.Method, method),
			slog.String(logkey.Subject, facts.caller.Subject), slog.Any(logkey.UnknownRoles, facts.unknown))
	}

	values := metadataValues(ctx)

	switch {
	case len(values) == 0:
		return facts, facts.roles, false, nil
	case !facts.roles.Has(role.Impersonator):
		i.log.Warn("talos-role metadata ignored: the peer is not an impersonator", slog.String(logkey.Method, method),
			slog.String(logkey.Subject, facts.caller.Subject), slog.String(logkey.Roles, facts.rolesText))

		return facts, facts.roles, false, nil
	}

	passed, err := i.parse(values, method)
	if err != nil {
		return nil, nil, false, err
	}

	return facts, passed, true, nil
}

// withCaller records who made the call: the client another node's apid
// names in the caller metadata of a forwarded call, else the peer
// certificate's. Anyone else naming a caller is refused: it would make the
// request log and the credential audit name someone else. The request log
// line gets the caller's serial and subject, and the forwarding node's.
func (i *Injector) withCaller(ctx context.Context, method string, facts *certFacts) (context.Context, error) {
	caller := facts.caller

	// Two lookups rather than a copy of the call's whole metadata.
	serials := metadata.ValueFromIncomingContext(ctx, CallerSerialMetadataKey)
	subjects := metadata.ValueFromIncomingContext(ctx, CallerSubjectMetadataKey)

	if len(serials) > 0 || len(subjects) > 0 {
		if !facts.roles.Has(role.Impersonator) {
			i.log.Warn("call refused: caller metadata from a peer that is not an impersonator", slog.String(logkey.Method, method),
				slog.String(logkey.Subject, facts.caller.Subject))

			return nil, ErrCallerNotAllowed
		}

		c, _, err := CallerFromMetadata(metadata.MD{CallerSerialMetadataKey: serials, CallerSubjectMetadataKey: subjects})
		if err != nil {
			i.log.Warn("call refused: malformed caller metadata", slog.String(logkey.Method, method), slog.String(logkey.Error, err.Error()))

			return nil, err
		}

		c.Via = caller.Subject
		caller = c
	}

	fields := logging.Fields{logkey.CallerSerial, caller.Serial, logkey.CallerSubject, caller.Subject}
	if caller.Via != "" {
		fields = append(fields, logkey.ForwardedBy, caller.Via)
	}

	logging.AddFields(ctx, fields)

	return contextWithCaller(ctx, caller), nil
}

func (i *Injector) fromMetadata(ctx context.Context, method string) (role.Set, error) {
	return i.parse(metadataValues(ctx), method)
}

func (i *Injector) parse(values []string, method string) (role.Set, error) {
	roles, ignored, err := ParseMetadataRoles(values)
	if err != nil {
		i.log.Warn("call refused: malformed role metadata", slog.String(logkey.Method, method), slog.String(logkey.Error, err.Error()))

		return nil, err
	}

	if len(ignored) > 0 {
		i.log.Warn("unknown roles in metadata ignored", slog.String(logkey.Method, method),
			slog.String(logkey.UnknownRoles, strings.Join(ignored, ",")))
	}

	return roles, nil
}

func metadataValues(ctx context.Context) []string {
	return metadata.ValueFromIncomingContext(ctx, wire.MetadataRole)
}
