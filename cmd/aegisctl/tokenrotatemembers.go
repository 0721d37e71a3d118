package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

// rotationMember is one member of the cluster as the rotation found it:
// its config as read at the start, or why it could not be read.
type rotationMember struct {
	name, addr string
	addrs      []string // every address the membership list gives
	listedRole string   // the membership list's, for a member not read
	cfg        *certs.MachineConfig
	err        error
}

func (m *rotationMember) controlPlane() bool {
	if m.cfg != nil {
		return m.cfg.Machine.Type.IsControlPlane()
	}

	return m.listedRole == string(certs.NodeControlPlane) || m.listedRole == string(certs.NodeInit)
}

func (m *rotationMember) role() string {
	if m.controlPlane() {
		return string(certs.NodeControlPlane)
	}

	return string(certs.NodeWorker)
}

// route sends a call to the member through the endpoint.
func (m *rotationMember) route(ctx context.Context) context.Context {
	return client.WithNode(ctx, m.addr)
}

// loadMembers lists the members from the endpoint's membership list,
// control planes first, and reads each one's config. A member that does
// not answer is kept, with its error: the steps name it.
func (r *staticRotation) loadMembers(ctx context.Context) error {
	members, err := r.listMembers(ctx, nil)
	if err != nil {
		return err
	}

	if len(members) == 0 {
		return errors.New("the membership list is empty")
	}

	r.members = members

	if r.trustdCAs, err = ca.ParseAcceptedSet(r.s.ctx.CA, r.e.clock.Now()); err != nil {
		return fmt.Errorf("the client config's CA: %w", err)
	}

	r.unlisted = r.unlistedEndpoints()

	return nil
}

// listMembers lists the members but those in known, control planes
// first, each with its config or why it could not be read.
func (r *staticRotation) listMembers(ctx context.Context, known []*rotationMember) ([]*rotationMember, error) {
	resp, err := membership.NewMembershipServiceClient(r.s.client.Conn()).List(ctx, &membership.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the members (the endpoint must be a control plane): %w", r.s.explain(err))
	}

	if err := failedNodes(resp); err != nil {
		return nil, fmt.Errorf("listing the members: %w", err)
	}

	var out []*rotationMember

	for _, msg := range resp.GetMessages() {
		for _, mb := range msg.GetMembers() {
			if len(mb.GetAddresses()) == 0 || slices.ContainsFunc(known, func(k *rotationMember) bool {
				return k.name == mb.GetHostname() && k.addr == mb.GetAddresses()[0]
			}) {
				continue
			}

			m := &rotationMember{
				name: mb.GetHostname(), addr: mb.GetAddresses()[0], addrs: mb.GetAddresses(), listedRole: mb.GetRole(),
			}
			m.cfg, m.err = r.readConfig(ctx, m)
			out = append(out, m)
		}
	}

	slices.SortStableFunc(out, func(a, b *rotationMember) int {
		return boolOrder(b.controlPlane()) - boolOrder(a.controlPlane())
	})

	return out, nil
}

// unlistedEndpoints are the hosts of the members' control-plane endpoints
// (cluster.controlPlane.endpoints) that no listed member has as its name
// or address: a control plane not registered yet, which the rotation would
// pass over while workers go on joining through it.
func (r *staticRotation) unlistedEndpoints() []string {
	known := map[string]bool{}

	for _, m := range r.members {
		known[m.name] = true

		for _, a := range m.addrs {
			known[a] = true
		}
	}

	var out []string

	for _, m := range r.members {
		if m.cfg == nil {
			continue
		}

		for _, ep := range m.cfg.Cluster.ControlPlane.Endpoints {
			host := ep
			if h, _, err := net.SplitHostPort(ep); err == nil {
				host = h
			}

			if !known[host] {
				known[host] = true
				out = append(out, host)
			}
		}
	}

	return out
}

func boolOrder(b bool) int {
	if b {
		return 1
	}

	return 0
}

// readConfig reads and parses the member's config in effect.
func (r *staticRotation) readConfig(ctx context.Context, m *rotationMember) (*certs.MachineConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, rotateStaticCallTimeout)
	defer cancel()

	data, err := currentConfig(m.route(ctx), r.s.client)
	if err != nil {
		return nil, r.s.explain(err)
	}

	return certs.ParseMachineConfig(m.name+"'s machine config", data, r.e.clock.Now())
}

// acceptOnControlPlane is step 1 on one control plane: the new token
// becomes machine.token, the old one a previous token until the overlap
// ends (expired previous tokens are dropped on the way). A control plane
// already on the new token, from an earlier run, is only checked. Its
// trustd must accept both tokens: one that took the new token but refuses
// the old (a node without previous tokens) would strand every worker.
func (r *staticRotation) acceptOnControlPlane(ctx context.Context, m *rotationMember) error {
	old := m.cfg.TrustdToken()

	if !old.Equal(r.fresh) {
		if err := r.apply(ctx, m, withNewToken(m.cfg, r.fresh, r.expires, r.e.clock.Now())); err != nil {
			return err
		}
	}

	if err := r.checkHoldsNew(ctx, m); err != nil {
		return err
	}

	if err := r.waitTrustd(ctx, m, r.fresh, true); err != nil {
		return err
	}

	if old.Equal(r.fresh) {
		return nil
	}

	// trustd took the new token and the old one as previous in one update.
	if v, err := r.probeTrustd(ctx, m, old); v != verdictAccepted {
		return fmt.Errorf("its trustd does not accept the old token beside the new one (a node that keeps no previous "+
			"tokens?): %w", err)
	}

	return nil
}

// withNewToken is a control plane's config with fresh as machine.token
// and the token it had as a previous one until expires. Previous tokens
// expired at now go, as does fresh if it was one.
func withNewToken(cur *certs.MachineConfig, fresh token.Token, expires, now time.Time) *certs.MachineConfig {
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
func (r *staticRotation) updateWorker(ctx context.Context, m *rotationMember) error {
	if !m.cfg.TrustdToken().Equal(r.fresh) {
		cfg := *m.cfg
		cfg.Machine.Token = r.fresh.Reveal()

		if err := r.apply(ctx, m, &cfg); err != nil {
			return err
		}
	}

	return r.checkHoldsNew(ctx, m)
}

// checkHoldsNew reads the member's config in effect back: it must hold
// the new token.
func (r *staticRotation) checkHoldsNew(ctx context.Context, m *rotationMember) error {
	got, err := r.readConfig(ctx, m)
	if err != nil {
		return fmt.Errorf("checking its config: %w", err)
	}

	if !got.TrustdToken().Equal(r.fresh) {
		return errors.New("its config in effect does not hold the new token")
	}

	return nil
}

// dropOnControlPlane is step 3 on one control plane: its previous tokens
// go, and its trustd is checked to refuse each old token.
func (r *staticRotation) dropOnControlPlane(ctx context.Context, m *rotationMember, old []token.Token) error {
	cur, err := r.readConfig(ctx, m)
	if err != nil {
		return err
	}

	if !cur.TrustdToken().Equal(r.fresh) {
		return errors.New("its config no longer holds the new token: another change came in between")
	}

	if len(cur.Machine.PreviousTokens) > 0 {
		cfg := *cur
		cfg.Machine.PreviousTokens = nil

		if err := r.apply(ctx, m, &cfg); err != nil {
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

// apply sends cfg to the member, to be applied without a reboot.
func (r *staticRotation) apply(ctx context.Context, m *rotationMember, cfg *certs.MachineConfig) error {
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, rotateStaticCallTimeout)
	defer cancel()

	resp, err := r.s.client.ApplyConfiguration(m.route(ctx), &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		return r.s.explain(err)
	}

	return failedNodes(resp)
}

// trustdVerdict is what a probe learned of trustd's view of a token.
type trustdVerdict int

const (
	verdictUnknown  trustdVerdict = iota // no answer about the token (yet)
	verdictAccepted                      // judged valid, then the empty CSR refused
	verdictRefused                       // Unauthenticated
)

// probeTrustd presents tok to the member's trustd with no CSR, so that
// trustd, having judged the token, refuses the request for its CSR and
// issues nothing. A token accepted before the time sync meets the time
// gate (FailedPrecondition) instead, which also comes after the token.
func (r *staticRotation) probeTrustd(ctx context.Context, m *rotationMember, tok token.Token) (trustdVerdict, error) {
	endpoint := net.JoinHostPort(m.addr, strconv.Itoa(wire.TrustdPort))

	_, _, err := join.GRPCTransport{CAs: r.trustdCAs}.Certificate(ctx, endpoint, tok, nil)

	switch status.Code(err) {
	case codes.Unauthenticated:
		return verdictRefused, err
	case codes.InvalidArgument, codes.FailedPrecondition:
		return verdictAccepted, err
	case codes.OK:
		return verdictUnknown, errors.New("trustd issued a certificate for an empty request")
	case codes.ResourceExhausted:
		return verdictUnknown, fmt.Errorf("checking trustd on %s: rate limited: %w", endpoint, err)
	default:
		return verdictUnknown, err
	}
}

// waitTrustd waits until the member's trustd accepts tok (accept) or
// refuses it: trustd follows machined's config a moment after it is
// applied.
func (r *staticRotation) waitTrustd(ctx context.Context, m *rotationMember, tok token.Token, accept bool) error {
	ctx, cancel := context.WithTimeout(ctx, rotateStaticTrustdWait)
	defer cancel()

	want := map[bool]trustdVerdict{true: verdictAccepted, false: verdictRefused}[accept]

	for {
		got, err := r.probeTrustd(ctx, m, tok)

		switch {
		case got == want:
			return nil
		case got == verdictUnknown && err != nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded:
			return err // an answer that waiting does not change
		}

		if r.pause(ctx) != nil {
			what := map[bool]string{true: "accept", false: "refuse"}[accept]

			return fmt.Errorf("trustd on %s did not %s the token %s within %s (last answer: %v)",
				m.addr, what, tok, rotateStaticTrustdWait, err)
		}
	}
}

// pause waits rotateStaticProbeInterval on the command's clock, or until
// ctx ends.
func (r *staticRotation) pause(ctx context.Context) error {
	t := r.e.clock.NewTimer(rotateStaticProbeInterval)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
