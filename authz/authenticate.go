package authz

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// AuthenticatorConfig configures an Authenticator.
type AuthenticatorConfig struct {
	// Logger receives one record per refused call. Nil discards.
	Logger *slog.Logger
	// Recheck is called at every call with the chain the connection's
	// handshake verified (leaf first, accepted CA last). A handshake
	// verifies once, but a connection lives on: Recheck lets the caller
	// refuse calls once the chain's CA has left the accepted set or a
	// certificate of the chain has expired. ctx is the call's, which holds
	// what the server put in its connection's context. A non-nil error
	// refuses the call as unauthenticated. Nil means no re-check.
	Recheck func(ctx context.Context, chain []*x509.Certificate) error
}

// Authenticator is the first of the three interceptors: it finds the client
// certificate that the TLS handshake verified and records it in the context
// (see PeerCertificate). It decides nothing about roles. It belongs on
// listeners that require client certificates, such as apid's.
type Authenticator struct {
	log     *slog.Logger
	recheck func(context.Context, []*x509.Certificate) error
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(cfg AuthenticatorConfig) *Authenticator {
	return &Authenticator{log: defaults.Logger(cfg.Logger), recheck: cfg.Recheck}
}

// UnaryServerInterceptor authenticates unary calls.
func (a *Authenticator) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return unaryInterceptor(a.authenticate)
}

// StreamServerInterceptor authenticates streams.
func (a *Authenticator) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return streamInterceptor(a.authenticate)
}

// authenticate trusts only VerifiedChains: PeerCertificates holds whatever
// the peer sent, verified or not.
func (a *Authenticator) authenticate(ctx context.Context, method string) (context.Context, error) {
	p, _ := peer.FromContext(ctx)

	var chain []*x509.Certificate

	if p != nil {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			chain = info.State.VerifiedChains[0]
		}
	}

	err := CheckClientChain(chain)
	if err == nil && a.recheck != nil {
		if rerr := a.recheck(ctx, chain); rerr != nil {
			err = fmt.Errorf("%w: %w", ErrUnauthenticated, rerr)
		}
	}

	if err != nil {
		a.log.Warn("call refused: no valid client certificate", slog.String(logkey.Method, method),
			slog.String(logkey.Peer, peerAddr(p)), slog.String(logkey.Error, err.Error()))

		if errors.Is(err, ErrRevoked) {
			return nil, grpcError(ErrRevoked)
		}

		return nil, grpcError(ErrUnauthenticated)
	}

	return contextWithPeer(ctx, chain), nil
}

func peerAddr(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return ""
	}

	return p.Addr.String()
}
