package statictoken

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/token"
)

// Node is one member of the cluster as the rotation found it: its config
// as read at the start, or why it could not be read.
type Node struct {
	rollout.Member
	// Config is the member's config in effect when it was listed.
	Config *certs.MachineConfig
	// Err is why Config could not be read.
	Err error
}

// ControlPlane reports whether the member is a control plane: by its
// config, else by the role the membership list gives.
func (m *Node) ControlPlane() bool {
	if m.Config != nil {
		return m.Config.Machine.Type.IsControlPlane()
	}

	return m.Role == string(certs.NodeControlPlane) || m.Role == string(certs.NodeInit)
}

// NodeRole is controlplane or worker, as ControlPlane says.
func (m *Node) NodeRole() string {
	if m.ControlPlane() {
		return string(certs.NodeControlPlane)
	}

	return string(certs.NodeWorker)
}

// loadMembers lists the members and reads each one's config.
func (r *Rotation) loadMembers(ctx context.Context) error {
	members, err := r.listMembers(ctx, nil)
	if err != nil {
		return err
	}

	if len(members) == 0 {
		return errors.New("the membership list is empty")
	}

	r.members = members

	if r.trustdCAs, err = ca.ParseAcceptedSet(r.opts.TrustdCAs, r.w.Clock().Now()); err != nil {
		return fmt.Errorf("the client config's CA: %w", err)
	}

	r.unlisted = r.unlistedEndpoints()

	return nil
}

// unlistedEndpoints are the control-plane endpoints of the members'
// configs that no member is.
func (r *Rotation) unlistedEndpoints() []string {
	configs := make([]*certs.MachineConfig, len(r.members))
	for i, m := range r.members {
		configs[i] = m.Config
	}

	return rollout.Unlisted(nodesOf(r.members), configs)
}

// listMembers lists the members but those in known, control planes
// first, each with its config or why it could not be read.
func (r *Rotation) listMembers(ctx context.Context, known []*Node) ([]*Node, error) {
	listed, err := r.w.Members(ctx, nodesOf(known), nil)
	if err != nil {
		return nil, err
	}

	out := make([]*Node, 0, len(listed))

	for _, mb := range listed {
		m := &Node{Member: mb}
		m.Config, m.Err = r.w.ReadConfig(ctx, mb)
		out = append(out, m)
	}

	return out, nil
}

func nodesOf(nodes []*Node) []rollout.Member {
	out := make([]rollout.Member, len(nodes))
	for i, n := range nodes {
		out[i] = n.Member
	}

	return out
}

// oldTokens are the tokens the members hold other than the new one: what
// step 3 checks trustd refuses.
func (r *Rotation) oldTokens() []token.Token {
	var out []token.Token

	add := func(t token.Token) {
		if t.IsZero() || t.Equal(r.opts.Token) || slices.ContainsFunc(out, t.Equal) {
			return
		}

		out = append(out, t)
	}

	for _, m := range r.members {
		if m.Err != nil {
			continue
		}

		add(m.Config.TrustdToken())

		for _, p := range m.Config.PreviousTrustdTokens() {
			add(p.Token)
		}
	}

	return out
}

// acceptOnControlPlane is step 1 on one control plane: the new token
// becomes machine.token, the old one a previous token until the overlap
// ends (expired previous tokens are dropped on the way). A control plane
// already on the new token, from an earlier run, is only checked. Its
// trustd must accept both tokens: one that took the new token but refuses
// the old (a node without previous tokens) would strand every worker.
func (r *Rotation) acceptOnControlPlane(ctx context.Context, m *Node) error {
	fresh, old := r.opts.Token, m.Config.TrustdToken()

	if !old.Equal(fresh) {
		if err := r.w.Apply(ctx, m.Member, WithNewToken(m.Config, fresh, r.opts.Expires, r.w.Clock().Now())); err != nil {
			return err
		}
	}

	if err := r.checkHoldsNew(ctx, m); err != nil {
		return err
	}

	if err := r.waitTrustd(ctx, m, fresh, true); err != nil {
		return err
	}

	if old.Equal(fresh) {
		return nil
	}

	// trustd took the new token and the old one as previous in one update.
	if v, err := r.probeTrustd(ctx, m, old); v != verdictAccepted {
		return fmt.Errorf("its trustd does not accept the old token beside the new one (a node that keeps no previous "+
			"tokens?): %w", err)
	}

	return nil
}

// WithNewToken is a control plane's config with fresh as machine.token
// and the token it had as a previous one until expires. Previous tokens
// expired at now go, as does fresh if it was one.
func WithNewToken(cur *certs.MachineConfig, fresh token.Token, expires, now time.Time) *certs.MachineConfig {
	cfg := *cur
	prev := []certs.PreviousToken{}

	for _, p := range cur.Machine.PreviousTokens {
		if now.Before(p.Expires) && p.Token != fresh.Reveal() && p.Token != cur.Machine.Token {
			prev = append(prev, p)
		}
	}

	cfg.Machine.PreviousTokens = append(prev, certs.PreviousToken{Token: cur.Machine.Token, Expires: expires})
	cfg.Machine.Token = fresh.Reveal()

	return &cfg
}

// updateWorker is step 2 on one worker.
func (r *Rotation) updateWorker(ctx context.Context, m *Node) error {
	if !m.Config.TrustdToken().Equal(r.opts.Token) {
		cfg := *m.Config
		cfg.Machine.Token = r.opts.Token.Reveal()

		if err := r.w.Apply(ctx, m.Member, &cfg); err != nil {
			return err
		}
	}

	return r.checkHoldsNew(ctx, m)
}

// checkHoldsNew reads the member's config in effect back: it must hold
// the new token.
func (r *Rotation) checkHoldsNew(ctx context.Context, m *Node) error {
	got, err := r.w.ReadConfig(ctx, m.Member)
	if err != nil {
		return fmt.Errorf("checking its config: %w", err)
	}

	if !got.TrustdToken().Equal(r.opts.Token) {
		return errors.New("its config in effect does not hold the new token")
	}

	return nil
}

// dropOnControlPlane is step 3 on one control plane: its previous tokens
// go, and its trustd is checked to refuse each old token.
func (r *Rotation) dropOnControlPlane(ctx context.Context, m *Node, old []token.Token) error {
	cur, err := r.w.ReadConfig(ctx, m.Member)
	if err != nil {
		return err
	}

	if !cur.TrustdToken().Equal(r.opts.Token) {
		return errors.New("its config no longer holds the new token: another change came in between")
	}

	if len(cur.Machine.PreviousTokens) > 0 {
		cfg := *cur
		cfg.Machine.PreviousTokens = nil

		if err := r.w.Apply(ctx, m.Member, &cfg); err != nil {
			return err
		}
	}

	for _, t := range old {
		if err := r.waitTrustd(ctx, m, t, false); err != nil {
			return err
		}
	}

	return nil
}
