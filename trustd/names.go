package trustd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/sanpolicy"
)

// Names is the cluster's record of node names: which names its control
// planes hold, and to which node each name a token certificate carries is
// bound. Every DNS name of a token request is checked against it, and
// bound before the certificate leaves. Names are given in canonical form
// (ca.CanonicalName).
type Names interface {
	// ControlPlaneNames returns the names the cluster's control planes
	// prove: those of etcd's members and of the control planes' own
	// membership entries, which only control planes write.
	ControlPlaneNames(ctx context.Context) ([]string, error)
	// Check returns nil when name is bound to no live certificate, or to
	// one naming the address source. A refusal wraps ErrNameHeld and says
	// which node holds the name until when.
	Check(ctx context.Context, name string, source netip.Addr) error
	// Bind binds name to addrs (source among them) until notAfter, as one
	// transaction with Check's decision, so that of two requests for one
	// name only one wins. A binding to source already there is extended,
	// never shortened. A refusal wraps ErrNameHeld.
	Bind(ctx context.Context, b Binding) error
}

// Binding is a name as a certificate carries it: the node's addresses and
// the end of the certificate's life.
type Binding struct {
	// Name is the name bound, canonical.
	Name string
	// Source is the address the request came from; a binding it already
	// holds is extended.
	Source netip.Addr
	// Addresses are those the name is bound to: Source and the
	// certificate's IP addresses.
	Addresses []netip.Addr
	// NotAfter is when the certificate, and so the binding, ends.
	NotAfter time.Time
}

// requestNames are the DNS names a CSR asks for, the common name included
// when it is not an address, canonical and without repeats.
func requestNames(csr *ca.CSR) []string {
	req := csr.Request

	var out []string

	for _, n := range append([]string{req.Subject.CommonName}, req.DNSNames...) {
		if n == "" {
			continue
		}

		if _, err := netip.ParseAddr(n); err == nil {
			continue
		}

		if n = ca.CanonicalName(n); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}

	return out
}

// callerPolicy is the policy a request is held to: the caller's source,
// what the token allows and, for a token that names no DNS pattern, the
// one name of the request, the node's own. A token without patterns never
// obtains two names: a node has one.
func (r *request) callerPolicy(csr *ca.CSR) (*sanpolicy.Policy, error) {
	p := sanpolicy.ForCaller(r.grant.AllowedSANs, r.source)
	if r.grant.AllowedSANs.HasDNSPatterns() {
		return p, nil
	}

	switch names := requestNames(csr); len(names) {
	case 0:
		return p, nil
	case 1:
		return p.WithName(names[0])
	default:
		return nil, fmt.Errorf("%w: the request names %d names %v; a token without DNS patterns obtains one, the node's own",
			sanpolicy.ErrNotPermitted, len(names), names)
	}
}

// checkNames refuses a name a control plane holds or another node's live
// certificate carries. A request without names never reaches the store:
// a node asking for its addresses alone joins without etcd.
func (r *request) checkNames() error {
	names := requestNames(r.csr)
	if len(names) == 0 || r.s.cfg.Names == nil {
		return nil
	}

	cps, err := r.s.cfg.Names.ControlPlaneNames(r.ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNamesUnavailable, err)
	}

	for _, name := range names {
		if slices.Contains(cps, name) {
			return fmt.Errorf("%w: %s (a control plane of the cluster holds it)", ErrReservedName, name)
		}

		if err := r.s.cfg.Names.Check(r.ctx, name, r.source); err != nil {
			return namesError(err)
		}
	}

	return nil
}

// bindNames binds the request's names to its addresses for the longest
// life the certificate can have, once every other check passed and the
// token's use is counted: the binding is in etcd before the certificate
// exists.
func (r *request) bindNames() error {
	names := requestNames(r.csr)
	if len(names) == 0 || r.s.cfg.Names == nil {
		return nil
	}

	var addrs []netip.Addr
	if src := r.source.Unmap().WithZone(""); src.IsValid() {
		addrs = append(addrs, src)
	}

	for _, ip := range r.csr.Request.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok && !slices.Contains(addrs, a.Unmap()) {
			addrs = append(addrs, a.Unmap())
		}
	}

	notAfter := r.s.cfg.Clock.Now().Add(r.s.cfg.CertTTL)

	for _, name := range names {
		b := Binding{Name: name, Source: r.source.Unmap().WithZone(""), Addresses: addrs, NotAfter: notAfter}
		if err := r.s.cfg.Names.Bind(r.ctx, b); err != nil {
			return namesError(err)
		}
	}

	return nil
}

// namesError passes a refusal of the store on, and reports any other
// failure as the store being unavailable: names fail closed.
func namesError(err error) error {
	if err == nil || errors.Is(err, ErrNameHeld) {
		return err
	}

	return fmt.Errorf("%w: %w", ErrNamesUnavailable, err)
}
