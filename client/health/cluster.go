package health

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

// WaitCluster asks the endpoint (a control plane) to check the whole
// cluster from its member list, handing each verdict to Progress as it
// comes. The control plane waits up to the timeout itself; an endpoint
// that does not answer is asked again until then. ErrNoClusterHealth: the
// endpoint serves no cluster check.
func WaitCluster(ctx context.Context, opts Options) (Result, error) {
	opts = opts.withDefaults()

	clk := opts.Clock
	start := clk.Now()
	deadline := start.Add(opts.Timeout)
	round := Round{}

	for {
		left := max(deadline.Sub(clk.Now()), 0)

		err := clusterCall(ctx, opts, left, func(msg string) {
			opts.Progress(clk.Now().Sub(start), msg)
			round.Note(msg)
		})
		if err == nil {
			return Result{Round: round, Elapsed: clk.Now().Sub(start)}, nil
		}

		if status.Code(err) == codes.Unimplemented {
			return Result{}, ErrNoClusterHealth
		}

		// The control plane's verdict, or its refusal (a worker), as it
		// words it: it names what failed.
		if status.Code(err) == codes.FailedPrecondition {
			return Result{Round: round}, errors.New(status.Convert(err).Message())
		}

		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			return Result{Round: round}, fmt.Errorf("not healthy: %w", opts.Explain(err))
		}

		round[opts.endpointLabel()] = "not answering: " + opts.Explain(err).Error()

		if clk.Now().After(deadline) {
			return Result{Round: round}, fmt.Errorf("not healthy after %s: %s", opts.Timeout, round.Problems())
		}

		if !clock.Sleep(ctx, clk, opts.Interval) {
			return Result{Round: round}, fmt.Errorf("interrupted before the cluster was healthy: %s", round.Problems())
		}
	}
}

// clusterCall makes one HealthCheck call, handing each progress message
// to progress.
func clusterCall(ctx context.Context, opts Options, wait time.Duration, progress func(string)) error {
	stream, err := cluster.NewClusterServiceClient(opts.Client.Conn()).HealthCheck(ctx,
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

// Note keeps the last verdict of a subject ("SUBJECT: ok (…)" or
// "SUBJECT: PROBLEM") in the round; the closing "cluster healthy…" and
// messages of no subject are not verdicts.
func (r Round) Note(msg string) {
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
