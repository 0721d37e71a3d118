package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clusterres "github.com/siderolabs/talos/pkg/machinery/resources/cluster"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// converged waits until every control plane shows node present (or
// absent) both in its member list and in its members resource (what
// talosctl get members reads), and returns, for each control plane, when
// both first did, measured from start. Each round asks every control
// plane in turn; the figures are good to a round's length.
func converged(t *testing.T, admin *client.Client, cps []localcluster.Node, name string, present bool, start time.Time) []time.Duration {
	t.Helper()

	seen := make([]time.Duration, len(cps))
	deadline := time.Now().Add(waitTimeout)

	for done := 0; done < len(cps); {
		if time.Now().After(deadline) {
			t.Fatalf("%s present=%v not shown by every control plane within %s: %v", name, present, waitTimeout, seen)
		}

		for i, cp := range cps {
			if seen[i] != 0 {
				continue
			}

			ok, err := shows(etcdCtx(t), admin, cp, name)
			if err == nil && ok == present {
				seen[i] = time.Since(start)
				done++
			}
		}

		time.Sleep(10 * time.Millisecond)
	}

	return seen
}

// shows says whether cp lists name both in its member list and in its
// members resource; an error when the two disagree.
func shows(ctx context.Context, admin *client.Client, cp localcluster.Node, name string) (bool, error) {
	ctx = client.WithNode(ctx, cp.Address)

	list, err := membership.NewMembershipServiceClient(admin.Conn()).List(ctx, &membership.ListRequest{})
	if err != nil {
		return false, err
	}

	inList := slices.ContainsFunc(list.GetMessages()[0].GetMembers(), func(m *membership.Member) bool { return m.GetHostname() == name })

	res, err := safe.StateListAll[*clusterres.Member](ctx, admin.COSI)
	if err != nil {
		return false, err
	}

	inResource := false

	for m := range res.All() {
		inResource = inResource || m.TypedSpec().Hostname == name
	}

	if inList != inResource {
		return false, fmt.Errorf("%s: list %v, resource %v", cp.Name, inList, inResource)
	}

	return inList, nil
}

// spread is the time between the first control plane and the last, with
// each one's figure.
func spread(seen []time.Duration) (time.Duration, string) {
	parts := make([]string, len(seen))
	for i, d := range seen {
		parts[i] = d.Round(time.Millisecond).String()
	}

	return slices.Max(seen) - slices.Min(seen), strings.Join(parts, ", ")
}
