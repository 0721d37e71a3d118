package upgrade

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/aegis-os/aegis/rollout"
)

// Entry is one member in a plan.
type Entry struct {
	rollout.Member
	// From is the Aegis version the member runs.
	From string
	// Batch is the batch the member is upgraded in, from 1: each control
	// plane alone, then the workers Options.Batch at a time. Zero: the
	// member already runs the target and is skipped.
	Batch int
}

// Skipped reports whether the member already runs the target.
func (e Entry) Skipped() bool { return e.Batch == 0 }

// Plan is what a run does: the target, and every member in the order it
// is upgraded (those skipped where their turn would be).
type Plan struct {
	// Target is the version of the bundle, which every member ends on.
	Target string
	// Bundle is the bundle's path.
	Bundle string
	// Entries are the members, control planes first.
	Entries []Entry
}

// Batches are the entries to upgrade, batch by batch, in order.
func (p *Plan) Batches() [][]Entry {
	var out [][]Entry

	for _, e := range p.Entries {
		if e.Skipped() {
			continue
		}

		if e.Batch > len(out) {
			out = append(out, nil)
		}

		out[e.Batch-1] = append(out[e.Batch-1], e)
	}

	return out
}

// Pending counts the members the run upgrades.
func (p *Plan) Pending() int {
	n := 0

	for _, e := range p.Entries {
		if !e.Skipped() {
			n++
		}
	}

	return n
}

// planInput is what a plan is made of, read from the cluster and the
// options.
type planInput struct {
	target    string
	bundle    string
	members   []rollout.Member // control planes first
	versions  map[string]string
	batch     int
	endpoints []string
	skew      func(running, target string) error
}

// makePlan orders the members (the control planes one at a time, those
// the client calls through last, so that it keeps a route while it can;
// then the workers in batches), skips those on the target, and refuses
// the members whose version the skew policy does not allow to go to the
// target, named under each reason.
func makePlan(in planInput) (*Plan, error) {
	if !slices.ContainsFunc(in.members, rollout.Member.ControlPlane) {
		return nil, rollout.ErrNoControlPlane
	}

	members := slices.Clone(in.members)
	slices.SortStableFunc(members, func(a, b rollout.Member) int {
		return rank(a, in.endpoints) - rank(b, in.endpoints)
	})

	p := &Plan{Target: in.target, Bundle: in.bundle}
	batch, inBatch := 0, 0
	refused := &refusals{}

	for _, m := range members {
		e := Entry{Member: m, From: in.versions[m.Addr]}

		switch {
		case e.From == in.target:
		case refused.add(m, in.skew(e.From, in.target)):
		case m.ControlPlane() || inBatch == 0 || inBatch == in.batch:
			batch++
			inBatch = 1
			e.Batch = batch
		default:
			inBatch++
			e.Batch = batch
		}

		if m.ControlPlane() {
			inBatch = 0 // the first worker starts a batch of its own
		}

		p.Entries = append(p.Entries, e)
	}

	if err := refused.err(in.target); err != nil {
		return nil, err
	}

	return p, nil
}

// refusals are the members the skew policy refuses, by reason, in the
// order the reasons came.
type refusals struct {
	reasons []string
	members map[string][]string
}

// add records m under err's reason, and reports whether err refused it.
func (r *refusals) add(m rollout.Member, err error) bool {
	if err == nil {
		return false
	}

	if r.members == nil {
		r.members = map[string][]string{}
	}

	reason := err.Error()
	if r.members[reason] == nil {
		r.reasons = append(r.reasons, reason)
	}

	r.members[reason] = append(r.members[reason], m.String())

	return true
}

// err names every member refused, under its reason; nil if none was.
func (r *refusals) err(target string) error {
	if len(r.reasons) == 0 {
		return nil
	}

	lines := make([]string, len(r.reasons))
	for i, reason := range r.reasons {
		lines[i] = reason + ": " + strings.Join(r.members[reason], ", ")
	}

	return fmt.Errorf("nothing changed: the bundle's version %s is outside the skew policy of members:\n  %s",
		target, strings.Join(lines, "\n  "))
}

// rank orders members: control planes the client does not call through,
// then those it does, then workers.
func rank(m rollout.Member, endpoints []string) int {
	switch {
	case !m.ControlPlane():
		return 2
	case isEndpoint(m, endpoints):
		return 1
	default:
		return 0
	}
}

// isEndpoint reports whether one of the member's addresses or its name is
// the host of an endpoint.
func isEndpoint(m rollout.Member, endpoints []string) bool {
	for _, ep := range endpoints {
		host := ep
		if h, _, err := net.SplitHostPort(ep); err == nil {
			host = h
		}

		if host == m.Name || host == m.Addr || slices.Contains(m.Addrs, host) {
			return true
		}
	}

	return false
}

// errEmpty refuses a cluster whose member list is empty.
var errEmpty = errors.New("the membership list is empty")
