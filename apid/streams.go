package apid

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/reclaim"
)

// errTooManyStreams refuses a call over one of the stream caps; the
// refusal names the cap.
var errTooManyStreams = errors.New("apid: too many open streams")

// errNoChain refuses a call whose context holds no verified chain: the
// authenticator did not run.
var errNoChain = errors.New("apid: call without a verified client certificate")

// identity is what the per-identity cap counts by: the SHA-256 of the
// client certificate's public key, so that the certificates of one key
// (a renewal that keeps it) share one count.
type identity [sha256.Size]byte

// identityOf is the identity of a client certificate: the pool's share of a
// caller and the stream caps count by it.
func identityOf(cert *x509.Certificate) identity {
	return sha256.Sum256(cert.RawSubjectPublicKeyInfo)
}

// streamGuard admits calls under the stream caps (MaxStreamsPerConnection,
// MaxStreamsPerIdentity, MaxStreamsPerPeerNode, MaxStreams) and ends open
// calls whose credential stops being valid: a chain is checked once at the
// handshake and again when a call starts, but a follow may stay open for
// days. One goroutine watches every open call, and only while there is one.
type streamGuard struct {
	clock clock.Clock
	// check is the verdict on a chain now (apid's recheckClient).
	check func([]*x509.Certificate) error
	log   *slog.Logger
	// interval is how often every open chain is checked again.
	interval time.Duration
	reclaim  *reclaim.Tracker

	mu       sync.Mutex
	total    int
	perConn  map[string]int
	perID    map[identity]int
	open     map[*openStream]struct{}
	watching bool
	// wake tells the watcher that a call with an earlier expiry opened.
	wake chan struct{}
	// armed is when the watcher's timer fires; zero while it is not armed.
	armed time.Time
	// refused counts the calls refused over each cap, by metric scope.
	refused  map[string]uint64
	done     chan struct{}
	stopOnce sync.Once
}

// openStream is one admitted call.
type openStream struct {
	method   string
	conn     string
	id       identity
	weight   int
	chain    []*x509.Certificate
	notAfter time.Time
	end      context.CancelCauseFunc
	ended    bool
}

func newStreamGuard(clk clock.Clock, check func([]*x509.Certificate) error, log *slog.Logger) *streamGuard {
	return &streamGuard{
		clock: clk, check: check, log: log, interval: StreamRecheckInterval, reclaim: reclaim.New(ReclaimAfter),
		perConn: map[string]int{}, perID: map[identity]int{}, open: map[*openStream]struct{}{}, refused: map[string]uint64{},
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// admit counts a call of weight streams (the nodes it reaches) against the
// caps of its client and the node, and as one stream against its
// connection's; a unary call may go UnaryHeadroom over the node's cap. It
// returns the context the call must run in (ended, with the reason as its
// cause, when the credential stops being valid) and the release to call
// when the call ends.
func (g *streamGuard) admit(ctx context.Context, method string, weight int) (context.Context, func(), error) {
	chain, ok := authz.PeerChain(ctx)
	if !ok {
		return nil, nil, errNoChain
	}

	p := peerOf(ctx, chain)
	st := &openStream{method: method, conn: connKey(ctx), id: p.id, weight: weight, chain: chain, notAfter: p.notAfter}

	perConn, perID, total := MaxStreamsPerConnection, MaxStreamsPerIdentity, MaxStreams
	if authz.Impersonated(ctx) {
		perConn, perID = MaxStreamsPerPeerNode, MaxStreamsPerPeerNode
	}

	if isUnary(method) {
		total += UnaryHeadroom
	}

	g.mu.Lock()
	defer g.mu.Unlock()

	// The widest cap reached is the one named.
	switch {
	case g.total+weight > total:
		g.refused[scopeNode]++

		return nil, nil, fmt.Errorf("%w on this node (limit %d)", errTooManyStreams, total)
	case g.perID[st.id]+weight > perID:
		g.refused[scopeIdentity]++

		return nil, nil, fmt.Errorf("%w for this client certificate's key (limit %d)", errTooManyStreams, perID)
	case g.perConn[st.conn]+1 > perConn:
		g.refused[scopeConnection]++

		return nil, nil, fmt.Errorf("%w on this connection (limit %d)", errTooManyStreams, perConn)
	}

	ctx, st.end = context.WithCancelCause(ctx)
	g.perConn[st.conn]++ // one HTTP/2 stream, however many nodes it reaches
	g.perID[st.id] += weight
	g.total += weight
	g.open[st] = struct{}{}
	g.watchLocked(st.notAfter)
	g.reclaim.Observe(g.total)

	return ctx, func() { g.release(st) }, nil
}

// release gives back what admit counted; maps drop keys at zero, so a
// client that has gone leaves nothing behind.
func (g *streamGuard) release(st *openStream) {
	st.end(nil)

	g.mu.Lock()
	defer g.mu.Unlock()

	delete(g.open, st)
	g.total -= st.weight

	if g.perConn[st.conn]--; g.perConn[st.conn] <= 0 {
		delete(g.perConn, st.conn)
	}

	if g.perID[st.id] -= st.weight; g.perID[st.id] <= 0 {
		delete(g.perID, st.id)
	}

	g.reclaim.Observe(g.total)
}

// ended returns why ctx (from admit) was ended by the guard, or err: a
// call cut short because its credential expired, or because apid stops,
// reports that, not the cancellation the backend saw.
func ended(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); isCredentialEnded(cause) || errors.Is(cause, errStopping) {
		return cause
	}

	return err
}

// chainNotAfter is when the first certificate of chain expires.
func chainNotAfter(chain []*x509.Certificate) time.Time {
	end := chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(end) {
			end = c.NotAfter
		}
	}

	return end
}

// guardedStream runs a call in the context admit returned.
type guardedStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's own context, as grpc.ServerStream has
}

func (s *guardedStream) Context() context.Context { return s.ctx }
