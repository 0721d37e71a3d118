package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/connlimit"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/timesync"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
	"github.com/aegis-os/aegis/trustd/tokenauth"
)

// nodeSource is trustd's view of the node as machined hands it over its
// socket: the OS CA (an issuer), the accepted CAs, the server certificate,
// the control planes' hosts, the machine config's token with the names it
// obtains (cluster.workerSANs) and the time-sync gate. Every field
// follows machined's updates; the token and its names through the
// authenticator once it is built (SetStatic).
type nodeSource struct {
	log      *slog.Logger
	issuer   atomic.Pointer[ca.Issuer]
	accepted atomic.Pointer[ca.AcceptedSet]
	keyPair  certs.KeyPair
	gate     timesync.Gate

	controlPlanes atomic.Pointer[[]string]
	revoked       trustd.RevocationFeed

	once       sync.Once
	token      token.Token          // the first update's, to build the authenticator
	workerSANs *sanpolicy.Policy    // with token
	previous   []tokenauth.Previous // with token
	ready      chan struct{}        // closed after the first complete update

	// static is the latest update's tokens and names; auth, once set,
	// receives each of them.
	mu     sync.Mutex
	static struct {
		tok      token.Token
		sans     *sanpolicy.Policy
		previous []tokenauth.Previous
	}
	auth *tokenauth.Authenticator
}

// setStatic records the latest tokens and passes them on to the
// authenticator, if there is one yet.
func (n *nodeSource) setStatic(tok token.Token, sans *sanpolicy.Policy, previous []tokenauth.Previous) {
	n.mu.Lock()
	defer n.mu.Unlock()

	n.static.tok, n.static.sans, n.static.previous = tok, sans, previous
	if n.auth != nil {
		n.auth.SetStatic(tok, sans, previous)
	}
}

// follow makes auth receive every token update from now on, starting
// with the latest.
func (n *nodeSource) follow(auth *tokenauth.Authenticator) {
	n.mu.Lock()
	defer n.mu.Unlock()

	n.auth = auth
	auth.SetStatic(n.static.tok, n.static.sans, n.static.previous)
}

// Issue implements trustd.Signer with the current OS CA.
func (n *nodeSource) Issue(req ca.Request) (*ca.Issued, error) {
	return n.issuer.Load().Issue(req)
}

// AcceptedCAs implements trustd.CAProvider.
func (n *nodeSource) AcceptedCAs() *ca.AcceptedSet { return n.accepted.Load() }

// ControlPlaneHosts implements trustd.ControlPlanes: the machine config's
// control-plane endpoints, as machined hands them over. trustd adds this
// node's own addresses and names from its server certificate.
func (n *nodeSource) ControlPlaneHosts() []string {
	if p := n.controlPlanes.Load(); p != nil {
		return *p
	}

	return nil
}

// setRevoked hands the list machined follows in etcd to the feed trustd
// serves, when it or its revision changed: every other update of the
// resources leaves the watching nodes asleep.
func (n *nodeSource) setRevoked(revision int64, in []*node.RevokedSerial) {
	cur := n.revoked.Snapshot()
	same := cur.Revision == revision && len(cur.List) == len(in)

	for i := 0; same && i < len(in); i++ {
		same = cur.List[i].GetSerial() == in[i].GetSerial() && cur.List[i].GetNotAfter().AsTime().Equal(in[i].GetNotAfter().AsTime())
	}

	if same && cur.List != nil {
		return
	}

	revoked := make([]*revocations.Revocation, 0, len(in))
	for _, r := range in {
		revoked = append(revoked, &revocations.Revocation{Serial: r.GetSerial(), NotAfter: r.GetNotAfter()})
	}

	n.revoked.Set(revision, revoked)
}

// apply takes one update; an update it cannot use leaves the previous state.
func (n *nodeSource) apply(res *node.Resources) error {
	now := time.Now()

	if res.GetOsCa() == nil || res.GetServer() == nil || len(res.GetAcceptedCas()) == 0 || res.GetTrustdToken() == "" {
		return errors.New("incomplete resources: waiting for the CA, server certificate, accepted CAs and token")
	}

	authority, err := ca.Parse(res.GetOsCa().GetCrt(), res.GetOsCa().GetKey(), now)
	if err != nil {
		return fmt.Errorf("OS CA: %w", err)
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: authority})
	if err != nil {
		return err
	}

	accepted, err := ca.ParseAcceptedSet(res.GetAcceptedCas(), now)
	if err != nil {
		return fmt.Errorf("accepted CAs: %w", err)
	}

	tok, err := token.Parse(res.GetTrustdToken())
	if err != nil {
		return fmt.Errorf("trustd token: %w", err)
	}

	previous, err := previousTokens(res.GetPreviousTrustdTokens())
	if err != nil {
		return err
	}

	workerSANs, err := sanpolicy.Parse(res.GetWorkerSans())
	if err != nil {
		return fmt.Errorf("worker SANs: %w", err)
	}

	if err = n.keyPair.Set(res.GetServer().GetCrt(), res.GetServer().GetKey()); err != nil {
		return err
	}

	hosts := slices.Clone(res.GetControlPlaneHosts())

	n.issuer.Store(iss)
	n.accepted.Store(accepted)
	n.controlPlanes.Store(&hosts)
	n.setRevoked(res.GetRevokedRevision(), res.GetRevoked())
	n.gate.Set(res.GetTime().GetSynced())
	n.setStatic(tok, workerSANs, previous)
	n.once.Do(func() {
		n.token, n.workerSANs, n.previous = tok, workerSANs, previous
		close(n.ready)
	})

	return nil
}

// previousTokens parses the previous static tokens of an update.
func previousTokens(in []*node.PreviousToken) ([]tokenauth.Previous, error) {
	out := make([]tokenauth.Previous, 0, len(in))

	for i, p := range in {
		tok, err := token.Parse(p.GetToken())
		if err != nil {
			return nil, fmt.Errorf("previous trustd token %d: %w", i, err)
		}

		out = append(out, tokenauth.Previous{Token: tok, Expires: p.GetExpires().AsTime()})
	}

	return out, nil
}

// setupNode builds trustd on resources from machined's trustd socket.
func setupNode(ctx context.Context, opts options, log *slog.Logger) (*daemon, error) {
	src := &nodeSource{log: log, ready: make(chan struct{})}

	stopWatch, err := resources.Follow(ctx, opts.nodeSocket, log, src.ready, src.apply)
	if err != nil {
		return nil, err
	}

	d := &daemon{log: log, ops: opts.opsLog(), listen: opts.listen, listenFD: opts.listenFD, certTTL: opts.certTTL, stop: stopWatch}

	if err = d.openMetrics(opts.MetricsListen); err != nil {
		d.close()

		return nil, err
	}

	if err = d.buildNode(src, opts); err != nil {
		d.close()

		return nil, err
	}

	if err = resources.FollowMembers(ctx, opts.nodeSocket, log, d.knowMembers); err != nil {
		d.close()

		return nil, err
	}

	if d.names != nil {
		go d.names.followHolders(ctx, log, d.server.Know)
	}

	return d, nil
}

// knowMembers makes the addresses of the cluster's members known to the
// listener (trustd.Server.Know), and the member list to the names' record
// (namestore.Store.KnowMembers), as machined publishes them.
func (d *daemon) knowMembers(c *node.MemberChanges) error {
	set := make([]namestore.Entry, 0, len(c.GetSet()))

	for _, m := range c.GetSet() {
		addr, err := netip.ParseAddr(m.GetAddress())
		if err != nil {
			continue
		}

		d.server.Know(addr)

		set = append(set, namestore.Entry{
			Name: m.GetHostname(), Addresses: []netip.Addr{addr}, ControlPlane: m.GetRole() == membership.RoleControlPlane,
		})
	}

	if d.names == nil {
		return nil
	}

	removed := make([]netip.Addr, 0, len(c.GetRemoved()))

	for _, a := range c.GetRemoved() {
		if addr, err := netip.ParseAddr(a); err == nil {
			removed = append(removed, addr)
		}
	}

	d.names.store.KnowMembers(c.GetFull(), set, removed)

	return nil
}

func (d *daemon) buildNode(src *nodeSource, opts options) error {
	if err := d.openStore(opts.state); err != nil {
		return err
	}

	if err := d.openEtcdStore(opts.state, opts.listen, src.ControlPlaneHosts()); err != nil {
		return err
	}

	auth, err := tokenauth.New(tokenauth.Config{
		Static: src.token, StaticSANs: src.workerSANs, Previous: src.previous, Store: d.store,
	})
	if err != nil {
		return err
	}

	src.follow(auth)

	members, err := d.memberStore()
	if err != nil {
		return err
	}

	if err = d.openNames(members, etcdFiles{dir: filepath.Join(opts.state, "etcd")}.formed); err != nil {
		return err
	}

	services := d.membershipService(members, src)

	d.server, err = trustd.New(trustd.Config{
		Signer: src, CAs: src, Authenticator: auth, TimeGate: &src.gate, Certificate: &src.keyPair, ControlPlanes: src,
		Revocations: &src.revoked, Audit: d.audit.audit, Refusals: d.audit.refusals, Logger: d.log, CertTTL: d.certTTL,
		Metrics: d.metrics, Services: services, Names: d.recordOfNames(),
	})
	if err != nil {
		return err
	}

	return d.listenTokens(opts.state)
}

// memberStore is the cluster's member list in etcd, when this control
// plane runs etcd: nil otherwise.
func (d *daemon) memberStore() (*membership.Store, error) {
	if d.etcd == nil {
		return nil, nil
	}

	return membership.New(membership.Config{Client: d.etcd, KeepAlive: d.leader.KeepAliveOnce})
}

// formedWriter answers at once, Unavailable, while the local etcd member
// is not part of a formed cluster: there is no member list to write to
// yet, and a write would wait out etcd's timeout while the worker waits
// for its answer.
type formedWriter struct {
	store  *membership.Store
	formed func() bool
}

// errNotFormed: the cluster's etcd is not formed yet.
var errNotFormed = fmt.Errorf("%w: the cluster's etcd is not bootstrapped yet", membership.ErrUnavailable)

func (w formedWriter) Put(ctx context.Context, m *membership.Member, role string) error {
	if !w.formed() {
		return errNotFormed
	}

	return w.store.Put(ctx, m, role)
}

func (w formedWriter) Hold(ctx context.Context, m *membership.Member, role string, terms membership.HoldTerms) error {
	if !w.formed() {
		return errNotFormed
	}

	return w.store.Hold(ctx, m, role, terms)
}

func (w formedWriter) Delete(ctx context.Context, address, role string) error {
	if !w.formed() {
		return errNotFormed
	}

	return w.store.Delete(ctx, address, role)
}

// membershipService records the heartbeats of workers in etcd, when this
// control plane runs etcd: a worker has no etcd of its own.
func (d *daemon) membershipService(store *membership.Store, cas trustd.CAProvider) func(grpc.ServiceRegistrar) {
	if store == nil {
		return nil
	}

	srv := membership.NewServer(membership.ServerConfig{
		Writer: formedWriter{store: store, formed: d.names.formed}, AcceptedCAs: func() *x509.CertPool { return cas.AcceptedCAs().Pool() }, Logger: d.log,
		Names: d.names.proven, Release: d.names.release, Connection: connlimit.Closing,
	})

	return func(g grpc.ServiceRegistrar) { srv.Register(g) }
}
