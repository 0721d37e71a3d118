package membership

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/requestid"
)

// Writer records a node's own entry with the role the server gives it,
// and removes it as the node leaves. *Store is one.
type Writer interface {
	Put(ctx context.Context, m *Member, role string) error
	Delete(ctx context.Context, address, role string) error
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Members is where List reads. Nil: List answers FailedPrecondition
	// (a worker, which runs no etcd).
	Members Reader
	// Writer records heartbeats. Nil: Heartbeat answers Unimplemented
	// (machined, which is reached through apid, takes no heartbeat).
	Writer Writer
	// AcceptedCAs are the CAs a heartbeat's node certificate must chain
	// to; asked at every call. Required with Writer.
	AcceptedCAs func() *x509.CertPool
	// Names records that the caller's certificate proves its entry's
	// hostname, bound to the entry's addresses until the certificate
	// expires, before the entry is written: a worker that joined while the
	// record was out of reach is in it from its first heartbeat on. A
	// refusal wraps ErrNotOwner (another node's live certificate carries
	// the name); any other failure is taken for etcd's. Nil records
	// nothing.
	Names func(ctx context.Context, hostname string, addresses []string, notAfter time.Time) error
	// Release frees, as a node leaves, the names its certificate proves,
	// where the record binds them to the certificate's addresses alone: a
	// node that left does not keep its name from the node that replaces
	// it. A failure is taken for etcd's. Nil releases nothing (the names
	// then end with the certificate).
	Release func(ctx context.Context, names, addresses []string) error
	// Certified lists the nodes that hold live certificates of the
	// cluster: the control planes, etcd's members, and the workers whose
	// names are bound until their certificates expire. It answers
	// ErrNoEtcd where the node runs no etcd; any other failure is taken
	// for etcd's. Nil: Certified and Remove answer FailedPrecondition (a
	// worker, or trustd).
	Certified func(ctx context.Context) ([]*CertifiedNode, error)
	// RemoveEntries deletes the aged-out entries of the worker named by
	// its hostname or one of its addresses, refusing a control plane's
	// (ErrControlPlane) and a live one (ErrAlive), and returns those
	// deleted (*Store.Remove). Remove needs it, Certified and Release;
	// without them Remove answers FailedPrecondition.
	RemoveEntries func(ctx context.Context, node string) ([]*Member, error)
	// Connection returns a context done once the connection a call came on
	// closes (connlimit.Closing), and whether it knows that connection:
	// a heartbeat on one it knows is held, when Writer is a Holder, for as
	// long as that connection stays open. Nil holds none.
	Connection func(ctx context.Context) (context.Context, bool)
	// Logger receives refusals and internal errors. Nil discards.
	Logger *slog.Logger
	// Clock is the time a certificate is checked at. Nil is the system's.
	Clock clock.Clock
	// Rand makes the references of internal errors. Nil is crypto/rand.
	Rand io.Reader
}

// Server serves the MembershipService.
type Server struct {
	membership.UnimplementedMembershipServiceServer

	cfg ServerConfig

	mu   sync.Mutex
	last map[string]time.Time // last recorded heartbeat per entry, for MinHeartbeatSpacing
}

// NewServer makes a Server.
func NewServer(cfg ServerConfig) *Server {
	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)

	return &Server{cfg: cfg, last: map[string]time.Time{}}
}

// Register adds the service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) { membership.RegisterMembershipServiceServer(g, s) }

// List returns the live members.
func (s *Server) List(ctx context.Context, _ *membership.ListRequest) (*membership.ListResponse, error) {
	if s.cfg.Members == nil {
		return nil, s.toStatus("list", errNoEtcd)
	}

	ms, err := s.cfg.Members.List(ctx)
	if err != nil {
		return nil, s.toStatus("list", err)
	}

	return &membership.ListResponse{Messages: []*membership.Members{{Members: ms}}}, nil
}

// Heartbeat records the caller's own entry as a worker's. The caller must
// present a node certificate that chains to the accepted CAs and names
// every address of the entry.
func (s *Server) Heartbeat(ctx context.Context, req *membership.HeartbeatRequest) (*membership.HeartbeatResponse, error) {
	if s.cfg.Writer == nil {
		return nil, s.toStatus("heartbeat", errHeartbeatElsewhere)
	}

	cert, err := s.peerCertificate(ctx)
	if err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	if err := Check(req.GetMember()); err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	if err := CheckOwner(cert, req.GetMember()); err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	if err := s.space(req.GetMember().GetAddresses()[0]); err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	if err := s.recordName(ctx, cert, req.GetMember()); err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	resp := &membership.HeartbeatResponse{AgeOut: durationpb.New(AgeOut(req.GetMember().GetInterval().AsDuration()))}

	if holder, closing, ok := s.holder(ctx); ok {
		if err := holder.Hold(ctx, req.GetMember(), RoleWorker, HoldTerms{Closing: closing, NotAfter: cert.NotAfter}); err != nil {
			return nil, s.toStatus("heartbeat", err)
		}

		resp.Hold = durationpb.New(HoldFor)

		return resp, nil
	}

	if err := s.cfg.Writer.Put(ctx, req.GetMember(), RoleWorker); err != nil {
		return nil, s.toStatus("heartbeat", err)
	}

	return resp, nil
}

// holder is the Writer as a Holder and the context of the call's
// connection, when the heartbeat can be held.
func (s *Server) holder(ctx context.Context) (Holder, context.Context, bool) {
	h, ok := s.cfg.Writer.(Holder)
	if !ok || s.cfg.Connection == nil {
		return nil, nil, false
	}

	closing, ok := s.cfg.Connection(ctx)
	if !ok {
		return nil, nil, false
	}

	return h, closing, true
}

// Leave removes the caller's own entry as a worker's, as the node leaves
// the cluster. The caller must present a node certificate that chains to
// the accepted CAs and names the address.
func (s *Server) Leave(ctx context.Context, req *membership.LeaveRequest) (*membership.LeaveResponse, error) {
	if s.cfg.Writer == nil {
		return nil, s.toStatus("leave", errLeaveElsewhere)
	}

	cert, err := s.peerCertificate(ctx)
	if err != nil {
		return nil, s.toStatus("leave", err)
	}

	if err := CheckAddress(req.GetAddress()); err != nil {
		return nil, s.toStatus("leave", err)
	}

	if err := CheckOwner(cert, &Member{Addresses: []string{req.GetAddress()}}); err != nil {
		return nil, s.toStatus("leave", err)
	}

	if err := s.cfg.Writer.Delete(ctx, req.GetAddress(), RoleWorker); err != nil {
		return nil, s.toStatus("leave", err)
	}

	if err := s.releaseNames(ctx, cert); err != nil {
		return nil, s.toStatus("leave", err)
	}

	s.cfg.Logger.Info("membership entry removed", slog.String(logkey.Address, req.GetAddress()))

	return &membership.LeaveResponse{}, nil
}

// recordName binds the entry's hostname, which cert proves, in the
// record of names.
func (s *Server) recordName(ctx context.Context, cert *x509.Certificate, m *Member) error {
	if s.cfg.Names == nil {
		return nil
	}

	err := s.cfg.Names(ctx, m.GetHostname(), m.GetAddresses(), cert.NotAfter)
	if err != nil && !errors.Is(err, ErrNotOwner) {
		return fmt.Errorf("%w: recording name %s: %w", ErrUnavailable, m.GetHostname(), err)
	}

	return err
}

// releaseNames frees the names cert proves, bound to its addresses.
func (s *Server) releaseNames(ctx context.Context, cert *x509.Certificate) error {
	if s.cfg.Release == nil || len(cert.DNSNames) == 0 {
		return nil
	}

	addresses := make([]string, 0, len(cert.IPAddresses))
	for _, ip := range cert.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			addresses = append(addresses, a.Unmap().String())
		}
	}

	if err := s.cfg.Release(ctx, cert.DNSNames, addresses); err != nil {
		return fmt.Errorf("%w: releasing names %v: %w", ErrUnavailable, cert.DNSNames, err)
	}

	return nil
}

// errTooOften: a node sent heartbeats faster than MinHeartbeatSpacing.
var errTooOften = errors.New("membership: heartbeats too frequent")

// space refuses a heartbeat for key sooner than MinHeartbeatSpacing after
// the last one. The map holds one entry per node that holds a valid
// certificate; once it holds MaxHeartbeatSources, it is pruned of those
// silent for MaxInterval, and a node it does not know is refused while it
// stays full. A node it knows is never refused for the table's size.
func (s *Server) space(key string) error {
	now := s.cfg.Clock.Now()

	s.mu.Lock()
	defer s.mu.Unlock()

	last, known := s.last[key]
	if known && now.Sub(last) < MinHeartbeatSpacing {
		return fmt.Errorf("%w: %s sent one %s ago", errTooOften, key, now.Sub(last))
	}

	if !known && len(s.last) >= MaxHeartbeatSources {
		for k, t := range s.last {
			if now.Sub(t) > MaxInterval {
				delete(s.last, k)
			}
		}

		if len(s.last) >= MaxHeartbeatSources {
			return fmt.Errorf("%w: more than %d nodes", errTooOften, MaxHeartbeatSources)
		}
	}

	s.last[key] = now

	return nil
}

// errNoCertificate: the caller presented no valid node certificate.
var errNoCertificate = errors.New("membership: a heartbeat needs the node's certificate")

// peerCertificate verifies the caller's TLS certificate as a node's
// server certificate, chained to the accepted CAs.
func (s *Server) peerCertificate(ctx context.Context) (*x509.Certificate, error) {
	cert, err := authz.NodeCertificate(ctx, s.cfg.AcceptedCAs(), s.cfg.Clock.Now())
	if err != nil {
		return nil, errors.Join(errNoCertificate, err)
	}

	return cert, nil
}

// Calls this node does not serve: the answer names the node that does.
var (
	errNoEtcd             = errors.New("membership: this node runs no etcd; ask a control plane")
	errHeartbeatElsewhere = errors.New("membership: heartbeats go to a control plane's trustd")
	errLeaveElsewhere     = errors.New("membership: leaving goes to a control plane's trustd")
)

// toStatus maps the package's errors to gRPC codes, once, here. A call
// this node does not serve is answered without a log line (FailedPrecondition
// for the list a worker lacks, Unimplemented for the calls only trustd
// takes); a refusal is logged as such; anything else is Internal, with a
// reference to the one log line of its cause.
func (s *Server) toStatus(op string, err error) error {
	switch {
	case errors.Is(err, errNoEtcd):
		return status.Error(codes.FailedPrecondition, errNoEtcd.Error())
	case errors.Is(err, errHeartbeatElsewhere), errors.Is(err, errLeaveElsewhere):
		return status.Error(codes.Unimplemented, err.Error())
	}

	code := codes.Internal

	switch {
	case errors.Is(err, errNoCertificate):
		code = codes.Unauthenticated
	case errors.Is(err, ErrNotOwner):
		code = codes.PermissionDenied
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNoEtcd), errors.Is(err, ErrControlPlane), errors.Is(err, ErrAlive):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, errTooOften), errors.Is(err, ErrFull):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrConflict):
		code = codes.Unavailable
	}

	if code == codes.Internal {
		ref := requestid.New(s.cfg.Rand)
		s.cfg.Logger.Error("membership "+op+" failed", slog.String(logkey.RequestID, ref), slog.String(logkey.Error, err.Error()))

		return status.Errorf(code, "membership: internal error (ref %s)", ref)
	}

	s.cfg.Logger.Warn("membership "+op+" refused", slog.String(logkey.Error, err.Error()))

	return status.Error(code, err.Error())
}

// Until runs beat now and then every interval until ctx ends. A failed
// beat is logged and tried again after a backoff: RetryInterval first (so
// that a node whose control plane just came back is listed within a
// second), doubling up to the interval, each wait jittered. Nodes that
// fail together, thousands behind one overloaded control plane, thus
// spread their retries over the interval instead of trying again every
// second together, which kept the control plane overloaded.
func Until(ctx context.Context, clk clock.Clock, interval time.Duration, log *slog.Logger, beat func(context.Context) error) {
	retry := backoff.Backoff{Min: min(interval, RetryInterval), Max: interval}
	failing := false

	for {
		err := beat(ctx)

		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Warn("membership heartbeat failed; retrying", slog.String(logkey.Error, err.Error()))
		case err == nil && failing:
			log.Info("membership heartbeat recorded again")
		}

		failing = err != nil

		wait := interval
		if failing {
			wait = retry.Next()
		} else {
			retry.Reset()
		}

		if !clock.Sleep(ctx, clk, wait) {
			return
		}
	}
}
