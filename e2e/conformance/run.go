package conformance

import (
	"context"
	"slices"
	"time"
)

// Cases returns the cases run on the target control plane and the worker,
// in the order of the report.
func Cases() []*Case {
	return slices.Concat(
		apidTLSCases(),
		identityCases(),
		roleCases(),
		routingCases(),
		aliasCases(),
		provenCases(),
		limitCases(),
		trustdCases(),
		authorityCases(),
		refusalCases(),
		listenerCases(),
		streamCases(),
		etcdCases(),
		healthCases(),
		revocationCases(),
		callerCases(),
		memberCases(),
		talosAPICases(),
		machineConfigCases(),
		previousTokenCases(),
		pingCases(),
		resetCases(),
	)
}

// Run runs every case opts selects against the cluster and returns their
// results, apid's first. It adds its test-only control plane to the
// cluster for the run and removes it afterwards. An error means the run
// could not be prepared; failed cases are results, not errors.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	e, err := newEnv(opts)
	if err != nil {
		return nil, err
	}
	defer e.close()

	main, probe := Filter(Cases(), opts.Match), Filter(slices.Concat(probeCases(), bootTimeCases()), opts.Match)

	if len(probe) > 0 {
		e.progress("adding the test-only control plane %s to cluster %s", e.Probe, e.cluster.Name)

		err = e.startProbe(ctx)
		defer e.stopProbe() //nolint:errcheck // best effort on the way out

		if err != nil {
			return nil, err
		}
	}

	e.progress("creating the tokens of the trustd cases")

	if err = e.prepareTokens(ctx); err != nil {
		return nil, err
	}

	// The test-only node's cases wait on a reboot and on the time
	// service's next poll; the others run meanwhile.
	probeResults := make(chan []Result, 1)

	go func() { probeResults <- e.runAll(ctx, probe) }()

	results := append(e.runAll(ctx, main), <-probeResults...)

	slices.SortStableFunc(results, func(a, b Result) int {
		if a.Case.Group == b.Case.Group {
			return 0
		}

		if a.Case.Group == "apid" {
			return -1
		}

		return 1
	})

	return results, nil
}

func (e *Env) runAll(ctx context.Context, cases []*Case) []Result {
	out := make([]Result, 0, len(cases))

	for _, c := range cases {
		res := e.runCase(ctx, c)
		verdict := "pass"

		if !res.Passed() {
			verdict = "FAIL"
		}

		e.progress("%-4s %s/%s (%s)", verdict, c.Group, c.Name, res.Duration.Round(time.Millisecond))
		out = append(out, res)
	}

	return out
}
