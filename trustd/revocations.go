package trustd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/source"
)

// RevocationSource gives the cluster's client-certificate revocation list
// as trustd serves it to the nodes: serial and expiry of each entry, the
// etcd revision it was read at, and a channel closed at its next change
// (RevocationFeed). It is read on every call and by every watcher.
type RevocationSource interface {
	Snapshot() RevocationSnapshot
}

// errNotANode refuses a Serials or Watch call without a node certificate.
var errNotANode = errors.New("trustd: the revocation list is served to the cluster's nodes: present a node certificate of an accepted CA")

// msgRevocationsRefused is the refusal record of a Serials or Watch call.
const msgRevocationsRefused = "revocation list refused"

// revocationService serves NodeRevocationService: the list workers, which
// run no etcd, enforce in their apid. The caller authenticates with its node
// certificate (a server certificate of an accepted CA, which every node
// holds and no client configuration does); the list itself is no secret
// (serials and expiries), but only the cluster's nodes need it.
type revocationService struct {
	revocations.UnimplementedNodeRevocationServiceServer

	s *Server
}

// Serials answers the list to a caller with a node certificate.
func (r revocationService) Serials(ctx context.Context, _ *revocations.SerialsRequest) (*revocations.SerialsResponse, error) {
	if err := r.s.checkNode(ctx); err != nil {
		r.s.refusals.Refuse(ctx, source.Key(sourceOf(ctx)), "revocations", msgRevocationsRefused,
			slog.String(logkey.Source, sourceOf(ctx).String()), slog.String(logkey.Error, err.Error()))

		return nil, toStatus(errNotANode, "")
	}

	return &revocations.SerialsResponse{Revocations: r.s.cfg.Revocations.Snapshot().List}, nil
}

// provesNode reports whether the client of a handshake presented a node
// certificate (checkNode's check, on the handshake's state): its
// connection then counts against the nodes' connection caps, not the
// anonymous ones (limits.go).
func (s *Server) provesNode(state tls.ConnectionState) bool {
	set := s.cfg.CAs.AcceptedCAs()
	if set == nil || len(state.PeerCertificates) == 0 {
		return false
	}

	_, err := authz.NodeChain(state.PeerCertificates, set.Pool(), s.cfg.Clock.Now())

	return err == nil
}

// checkNode verifies the certificate the caller presented in the
// handshake (requested, not required: joiners have none) as a node's.
func (s *Server) checkNode(ctx context.Context) error {
	_, err := s.nodeCertificate(ctx)

	return err
}

// nodeCertificate is the caller's certificate, verified as a node's.
func (s *Server) nodeCertificate(ctx context.Context) (*x509.Certificate, error) {
	set := s.cfg.CAs.AcceptedCAs()
	if set == nil {
		return nil, errNotANode
	}

	return authz.NodeCertificate(ctx, set.Pool(), s.cfg.Clock.Now())
}
