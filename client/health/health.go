// Package health waits until nodes, or a whole cluster, are healthy. With
// nodes named, it asks each for its services in rounds until every
// service of every node is running and healthy (and a control plane runs
// trustd); without, it asks the endpoint, a control plane, to check the
// whole cluster from its member list (ClusterService.HealthCheck) and
// follows the verdicts it streams. Progress goes to a callback, so that
// the caller prints it. The package imports no server package.
package health

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// ErrNoClusterHealth: the endpoint serves no ClusterService (an older
// node); a caller then checks the endpoint's own node with WaitNodes.
var ErrNoClusterHealth = errors.New("the endpoint serves no cluster health check")

// Options say what is checked, how long to wait and where progress goes.
type Options struct {
	// Client reaches the nodes through the endpoint. Required.
	Client *client.Client
	// Endpoints are the client's endpoints; they name the endpoint's own
	// node ("endpoint A,B") when Nodes is empty, and an endpoint that does
	// not answer. nil: "endpoint " alone.
	Endpoints []string
	// Nodes are the nodes WaitNodes checks, canonical and each once. nil:
	// the endpoint's own node. WaitCluster checks the members instead.
	Nodes []string
	// ControlPlanes are those of Nodes that must also run trustd. nil:
	// none.
	ControlPlanes []string
	// Timeout bounds the wait, from its start. Zero or less: no wait, the
	// verdict of the first round (of the first call, for the cluster).
	Timeout time.Duration
	// Interval is the pause between two rounds, or before asking an
	// endpoint that did not answer again. Zero: DefaultInterval.
	Interval time.Duration
	// CallTimeout bounds one round's calls, so that a node that hangs is
	// not answering rather than stalling the wait. Zero:
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Clock paces the rounds and measures the timeout and the elapsed
	// time. nil: the system clock.
	Clock clock.Clock
	// Explain words the error of a call for a person. nil: the error as
	// it is.
	Explain func(error) error
	// Progress receives each change as it is seen, with the time elapsed
	// since the start: "NODE: healthy", "NODE: waiting: PROBLEMS", or a
	// verdict of the cluster's check as the control plane words it. nil:
	// progress is discarded.
	Progress func(elapsed time.Duration, line string)
}

// withDefaults returns o with its zero fields set.
func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}

	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}

	if o.Explain == nil {
		o.Explain = func(err error) error { return err }
	}

	if o.Progress == nil {
		o.Progress = func(time.Duration, string) {}
	}

	o.Clock = defaults.Clock(o.Clock)

	return o
}

// endpointLabel names the endpoint in progress and verdicts.
func (o Options) endpointLabel() string {
	return "endpoint " + strings.Join(o.Endpoints, ",")
}

// Result is the outcome of a wait.
type Result struct {
	// Round is what the last round found; nil when there was no round.
	Round Round
	// Elapsed is how long the wait took, until every node (or the
	// cluster) was healthy.
	Elapsed time.Duration
}

// Round is what one round of checks found: per node (or, for the cluster,
// per subject of the control plane's verdicts), nothing if it is healthy,
// else what is wrong.
type Round map[string]string

// Healthy reports whether every node of the round is.
func (r Round) Healthy() bool {
	for _, p := range r {
		if p != "" {
			return false
		}
	}

	return true
}

// Problems lists the unhealthy nodes, sorted: "NODE: PROBLEM; …".
func (r Round) Problems() string {
	var out []string

	for _, n := range slices.Sorted(maps.Keys(r)) {
		if r[n] != "" {
			out = append(out, n+": "+r[n])
		}
	}

	return strings.Join(out, "; ")
}
