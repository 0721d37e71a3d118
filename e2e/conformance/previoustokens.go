package conformance

import (
	"context"
	"crypto/rand"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/token"
)

// previousTokenCases check machine.previousTokens, the overlap of a static
// token rotation, through dry runs of ApplyConfiguration that change
// nothing: a previous token is a live field with its secret redacted in
// the diff, an entry already expired is refused by its path, and a worker,
// which runs no trustd, takes none.
func previousTokenCases() []*Case {
	return []*Case{
		{
			Group: "apid", Name: "ApplyConfiguration dry run adding a previous static token",
			Expected: "OK: live, secret redacted",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				return dryRunPrevious(ctx, e, e.Target, time.Hour)
			},
		},
		{
			Group: "apid", Name: "ApplyConfiguration dry run adding an expired previous static token",
			Expected: "InvalidArgument: machine.previousTokens[0].expires: not in the future",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				return dryRunPrevious(ctx, e, e.Target, -time.Hour)
			},
		},
		{
			Group: "apid", Name: "ApplyConfiguration dry run adding a previous static token on the worker",
			Expected: "InvalidArgument: machine.previousTokens: only control planes",
			Run: func(ctx context.Context, e *Env, _ *Report) string {
				return dryRunPrevious(ctx, e, e.Worker, time.Hour)
			},
		},
	}
}

// dryRunPrevious reads node's config, adds a fresh previous token expiring
// in expiresIn, and asks for a dry run of the result. It answers the code
// and, on OK, whether the change is live and its secret is absent from the
// diff; on InvalidArgument, the first field path named.
func dryRunPrevious(ctx context.Context, e *Env, node string, expiresIn time.Duration) string {
	prev, err := token.Generate(rand.Reader)
	if err != nil {
		return "generating a token: " + err.Error()
	}

	var details string

	err = e.callAs(ctx, node, e.ids.admin, nil, func(ctx context.Context, c *grpc.ClientConn) error {
		cur, err := machineconfig.NewMachineConfigServiceClient(c).Get(ctx, &machineconfig.GetRequest{})
		if err != nil {
			return err
		}

		cfg, err := certs.ParseMachineConfig("the node's config", cur.GetMessages()[0].GetData(), time.Now())
		if err != nil {
			return err
		}

		cfg.Machine.PreviousTokens = append(cfg.Machine.PreviousTokens,
			certs.PreviousToken{Token: prev.Reveal(), Expires: time.Now().Add(expiresIn).UTC().Truncate(time.Second)})

		data, err := cfg.Marshal()
		if err != nil {
			return err
		}

		resp, err := machine.NewMachineServiceClient(c).ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
			Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT, DryRun: true,
		})
		if err == nil {
			details = resp.GetMessages()[0].GetModeDetails()
		}

		return err
	})

	switch {
	case err != nil && codeOf(err) == "InvalidArgument":
		return codeOf(err) + ": " + firstPreviousPath(status.Convert(err).Message())
	case err != nil:
		return codeOf(err) + ": " + status.Convert(err).Message()
	case !strings.Contains(details, "without a reboot: machine.previousTokens"):
		return "OK, not live: " + details
	case strings.Contains(details, prev.Secret()):
		return "OK, the secret shown in the diff"
	}

	return "OK: live, secret redacted"
}

// firstPreviousPath is the first problem of machine.previousTokens in
// msg: its path and, when it is one the cases expect, the problem in
// words without the times it names.
func firstPreviousPath(msg string) string {
	i := strings.Index(msg, "machine.previousTokens")
	if i < 0 {
		return msg
	}

	line, _, _ := strings.Cut(msg[i:], "\n")
	path, problem, _ := strings.Cut(line, ":")

	for _, known := range []string{"not in the future", "only control planes"} {
		if strings.Contains(problem, known) {
			return path + ": " + known
		}
	}

	return line
}
