package upgrade

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrQuorum refuses the upgrade of a control plane whose restart would
// leave etcd without quorum; the API maps it to FailedPrecondition.
var ErrQuorum = errors.New("upgrade: etcd would lose quorum")

// ErrLeaseHeld refuses the upgrade of a control plane while another one
// holds the upgrade lease; the API maps it to FailedPrecondition.
var ErrLeaseHeld = errors.New("upgrade: another control plane is upgrading")

// Member is one etcd member as the quorum check sees it.
type Member struct {
	// Name is the member's name (the node's hostname).
	Name string
	// Healthy is true when the member is started (not a learner, not
	// unstarted) and answers a status call.
	Healthy bool
}

// CheckQuorum refuses taking self down when the other members that are
// healthy would not be a quorum of the whole membership. The refusal names
// the members that are not healthy. A cluster of one member is allowed:
// its etcd is down during the restart whatever happens, as it is at any
// restart of that node.
func CheckQuorum(members []Member, self string) error {
	if len(members) <= 1 {
		return nil
	}

	quorum := len(members)/2 + 1
	healthy := 0

	var up, down []string

	for _, m := range members {
		switch {
		case m.Name == self:
		case m.Healthy:
			healthy++
			up = append(up, m.Name)
		default:
			down = append(down, m.Name)
		}
	}

	if healthy >= quorum {
		return nil
	}

	slices.Sort(up)
	slices.Sort(down)

	if len(down) == 0 {
		return fmt.Errorf("%w: %d members need %d up, and only %d (%s) would be while %s restarts; add a control plane first",
			ErrQuorum, len(members), quorum, healthy, strings.Join(up, ", "), self)
	}

	return fmt.Errorf("%w: %d of %d members would be up while %s restarts, %d needed; not healthy: %s; bring them back first",
		ErrQuorum, healthy, len(members), self, quorum, strings.Join(down, ", "))
}
