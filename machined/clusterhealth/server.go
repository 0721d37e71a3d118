// Package clusterhealth serves ClusterService.HealthCheck: a check of the
// whole cluster from a control plane. etcd has every control plane as a
// voter and one leader; every member answers through its apid with all its
// services up; every member's clock is synced and its node certificate has
// more than a quarter of its life left; all members accept the same CAs.
// Progress is streamed as each verdict changes; the call fails naming what
// is not healthy once the request's wait timeout has passed.
package clusterhealth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/membership"
)

// Etcd reports the health of the etcd members; *etcd.Etcd is one.
type Etcd interface {
	Health(ctx context.Context) ([]etcd.MemberHealth, error)
}

// Prober asks one node's apid for its services and shows its server
// certificate.
type Prober interface {
	Probe(ctx context.Context, address string) (Probe, error)
}

// Config configures a Server.
type Config struct {
	// Members is the cluster's member list. Nil: the node is no control
	// plane, and HealthCheck answers FailedPrecondition.
	Members membership.Reader
	// Etcd returns the local etcd; an error is reported as etcd's problem.
	Etcd func() (Etcd, error)
	// Prober reaches the nodes. Required with Members.
	Prober Prober
	Logger *slog.Logger
	Clock  clock.Clock
}

// Server serves cluster.ClusterService.
type Server struct {
	cluster.UnimplementedClusterServiceServer

	cfg Config
}

// New makes a Server.
func New(cfg Config) *Server {
	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Clock = defaults.Clock(cfg.Clock)

	return &Server{cfg: cfg}
}

// Register adds the service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) { cluster.RegisterClusterServiceServer(g, s) }

// HealthCheck checks the cluster in rounds until it is healthy or the
// request's wait timeout (zero: one round) has passed, sending each
// verdict when it changes.
func (s *Server) HealthCheck(req *cluster.HealthCheckRequest, stream cluster.ClusterService_HealthCheckServer) error {
	if s.cfg.Members == nil {
		return status.Error(codes.FailedPrecondition, "clusterhealth: this node is no control plane; ask one (its etcd holds the member list)")
	}

	wait := min(max(req.GetWaitTimeout().AsDuration(), 0), MaxWaitTimeout)
	ctx := stream.Context()
	deadline := s.cfg.Clock.Now().Add(wait)
	shown := map[string]string{}

	for {
		var (
			mu      sync.Mutex
			sendErr error
		)

		// Each verdict goes out as soon as it is known, and only when it
		// changed since the last round.
		emit := func(f Finding) {
			mu.Lock()
			defer mu.Unlock()

			if sendErr == nil && shown[f.Subject] != f.String() {
				shown[f.Subject] = f.String()
				sendErr = stream.Send(&cluster.HealthCheckProgress{Message: f.String()})
			}
		}

		findings := s.round(ctx, req.GetClusterInfo(), emit)
		if sendErr != nil {
			return sendErr
		}

		var failed []string

		for _, f := range findings {
			if f.Problem != "" {
				failed = append(failed, f.String())
			}
		}

		if len(failed) == 0 {
			return stream.Send(&cluster.HealthCheckProgress{Message: fmt.Sprintf("cluster healthy: %d checks passed", len(findings))})
		}

		if !s.cfg.Clock.Now().Add(PollInterval).Before(deadline) || !clock.Sleep(ctx, s.cfg.Clock, PollInterval) {
			s.cfg.Logger.Info("cluster health check failed", slog.String(logkey.Error, strings.Join(failed, "; ")))

			return status.Error(codes.FailedPrecondition, "cluster not healthy: "+strings.Join(failed, "; "))
		}
	}
}

// round runs every check once: the member list, the nodes the request
// expects, etcd, each node (at most MaxParallelProbes at a time) and the
// CAs, handing each finding to emit as soon as it is made.
func (s *Server) round(ctx context.Context, info *cluster.ClusterInfo, emit func(Finding)) []Finding {
	list := Finding{Subject: "member list"}

	members, err := s.cfg.Members.List(ctx)

	switch {
	case err != nil:
		list.Problem = "not readable: " + err.Error()
	case len(members) == 0:
		list.Problem = "empty"
	default:
		list.Detail = fmt.Sprintf("%d nodes", len(members))
	}

	emit(list)

	if list.Problem != "" {
		return []Finding{list}
	}

	findings := append([]Finding{list}, checkExpected(members, info.GetControlPlaneNodes(), info.GetWorkerNodes())...)
	for _, f := range findings[1:] {
		emit(f)
	}

	// etcd and the nodes are checked at once: a member that is down costs
	// one timeout, not two.
	etcdDone := make(chan Finding, 1)

	go func() {
		e := s.etcdFinding(ctx, members)
		emit(e)
		etcdDone <- e
	}()

	nodes := s.nodeFindings(ctx, members, emit)
	findings = append(append(findings, <-etcdDone), nodes...)

	cas := checkCAs(members)
	emit(cas)

	return append(findings, cas)
}

func (s *Server) etcdFinding(ctx context.Context, members []*membership.Member) Finding {
	e, err := s.cfg.Etcd()
	if err != nil {
		return checkEtcd(members, nil, err)
	}

	health, err := e.Health(ctx)

	return checkEtcd(members, health, err)
}

func (s *Server) nodeFindings(ctx context.Context, members []*membership.Member, emit func(Finding)) []Finding {
	out := make([]Finding, len(members))
	sem := make(chan struct{}, MaxParallelProbes)

	var wg sync.WaitGroup

	for i, m := range members {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()

			pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
			defer cancel()

			p, err := s.cfg.Prober.Probe(pctx, m.GetAddresses()[0])
			if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
				err = fmt.Errorf("no reply within %s", ProbeTimeout)
			}

			out[i] = checkNode(m, p, err, s.cfg.Clock.Now())
			emit(out[i])
		})
	}

	wg.Wait()

	return out
}
