package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/internal/clock"
)

// clusterHealthPrefix starts the message a control plane sends once the
// whole cluster passed.
const clusterHealthPrefix = "cluster healthy"

// errNoClusterHealth: the endpoint serves no ClusterService (an older
// node); health then checks the endpoint's own node.
var errNoClusterHealth = errors.New("the endpoint serves no cluster health check")

// waitClusterHealthy asks the endpoint (a control plane) to check the
// whole cluster from its member list, printing each verdict as it comes.
// The control plane waits up to the timeout itself; an endpoint that does
// not answer is asked again until then.
func waitClusterHealthy(ctx context.Context, s *session, timeout time.Duration, summary bool) (healthRound, error) {
	clk := s.e.clock
	start := clk.Now()
	deadline := start.Add(timeout)
	round := healthRound{}

	for {
		left := max(deadline.Sub(clk.Now()), 0)

		err := clusterHealthCall(ctx, s, left, func(msg string) {
			fmt.Fprintf(s.e.stderr, "[%5.1fs] %s\n", clk.Now().Sub(start).Seconds(), msg)
			round.note(msg)
		})
		if err == nil {
			if summary {
				fmt.Fprintf(s.e.stdout, "cluster healthy in %.1fs\n", clk.Now().Sub(start).Seconds())
			}

			return round, nil
		}

		if status.Code(err) == codes.Unimplemented {
			return nil, errNoClusterHealth
		}

		// The control plane's verdict, or its refusal (a worker), as it
		// words it: it names what failed.
		if status.Code(err) == codes.FailedPrecondition {
			return round, errors.New(status.Convert(err).Message())
		}

		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			return round, fmt.Errorf("not healthy: %w", s.explain(err))
		}

		endpoint := "endpoint " + strings.Join(s.endpoints, ",")
		round[endpoint] = "not answering: " + s.explain(err).Error()

		if clk.Now().After(deadline) {
			return round, fmt.Errorf("not healthy after %s: %s", timeout, round.problems())
		}

		if !clock.Sleep(ctx, clk, healthPollInterval) {
			return round, fmt.Errorf("interrupted before the cluster was healthy: %s", round.problems())
		}
	}
}

// clusterHealthCall makes one HealthCheck call, handing each progress
// message to progress.
func clusterHealthCall(ctx context.Context, s *session, wait time.Duration, progress func(string)) error {
	stream, err := cluster.NewClusterServiceClient(s.client.Conn()).HealthCheck(ctx,
		&cluster.HealthCheckRequest{WaitTimeout: durationpb.New(wait)})
	if err != nil {
		return err
	}

	for {
		msg, err := stream.Recv()

		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}

		progress(msg.GetMessage())
	}
}

// note keeps the last verdict of a subject ("SUBJECT: ok (…)" or
// "SUBJECT: PROBLEM") in the round.
func (r healthRound) note(msg string) {
	if strings.HasPrefix(msg, clusterHealthPrefix) {
		return
	}

	subject, verdict, ok := strings.Cut(msg, ": ")
	if !ok {
		return
	}

	if verdict == "ok" || strings.HasPrefix(verdict, "ok (") {
		verdict = ""
	}

	r[subject] = verdict
}
