package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/health"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// Service returns the etcd service of the node: restarted forever with
// backoff, healthy when the local member answers and, once a voter, serves
// a linearizable read.
func (e *Etcd) Service() system.Service { return service{e} }

type service struct{ e *Etcd }

func (s service) ID() string          { return ServiceID }
func (s service) DependsOn() []string { return nil }

func (s service) Runner() (runner.Runner, error) {
	return runner.Restart(memberRunner(s), runner.RestartConfig{Policy: runner.Forever, Clock: s.e.cfg.Clock}), nil
}

func (s service) HealthCheck() (health.Check, health.Settings) {
	return s.e.healthy, health.Settings{InitialDelay: 200 * time.Millisecond, Period: healthPeriod, Timeout: healthTimeout}
}

// AllowAPI lets the API restart etcd, and start or stop it (leaving the
// cluster is EtcdLeaveCluster).
func (s service) AllowAPI(system.Action) error { return nil }

// healthy is etcd's endpoint health: the member's status without errors,
// and for a voter a linearizable read (denied counts as healthy, as for
// etcdctl: the cluster answered).
func (e *Etcd) healthy(ctx context.Context) error {
	st, err := e.localStatus(ctx)
	if err != nil {
		return err
	}

	if len(st.Errors) > 0 {
		return fmt.Errorf("etcd: %v", st.Errors)
	}

	if st.IsLearner {
		return errors.New("etcd: learner, not yet promoted")
	}

	return e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Get(ctx, "health")

		return err
	})
}
