package authz

import (
	"context"
	"crypto/x509"
	"log/slog"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// AuthenticatorConfig configures an Authenticator.
type AuthenticatorConfig struct {
	// Logger receives one record per refused call. Nil discards.
	Logger *slog.Logger
}

// Authenticator is the first of the three interceptors: it finds the client
// certificate that the TLS handshake verified and records it in the context
// (see PeerCertificate). It decides nothing about roles. It belongs on
// listeners that require client certificates, such as apid's.
type Authenticator struct {
	log *slog.Logger
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(cfg AuthenticatorConfig) *Authenticator {
	return &Authenticator{log: orDiscard(cfg.Logger)}
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

	var chains [][]*x509.Certificate

	if p != nil {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			chains = info.State.VerifiedChains
		}
	}

	// A leaf without an explicit ClientAuth usage passes crypto/tls (no
	// extended key usage means any) but was not made for a client.
	if len(chains) == 0 || len(chains[0]) == 0 || !slices.Contains(chains[0][0].ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		a.log.Warn("call refused: no verified client certificate with ClientAuth",
			slog.String(FieldMethod, method), slog.String(FieldPeer, peerAddr(p)))

		return nil, grpcError(ErrUnauthenticated)
	}

	return contextWithPeer(ctx, chains[0][0]), nil
}

func peerAddr(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return ""
	}

	return p.Addr.String()
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}

	return l
}
