package scale

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/renewal"
)

// counters are the fleet's calls to trustd, counted as the workers make
// them: every flow goes through one counting Caller per worker.
type counters struct {
	calls, failed atomic.Int64
	// lost counts the streams that ended after they had been answered,
	// with their endpoint (trustdclient.Lost): a control plane killed
	// ends its workers' watches so; they are not failed calls.
	lost        atomic.Int64
	renewals    atomic.Int64
	renewFailed atomic.Int64
	causes      causes
}

// countingCaller counts the calls a worker's flows make through its
// trustd client, and remembers when the last one succeeded; after mark,
// also when the first call since began and when the first of those calls
// was answered.
type countingCaller struct {
	c    *trustdclient.Client
	n    *counters
	last atomic.Int64 // unix nanoseconds of the last call answered

	// since is the mark (unix nanoseconds; 0 for none); tried is when the
	// first call begun after it began, answered when the first of those
	// was answered (0 until then).
	since, tried, answered atomic.Int64
}

// mark starts recording the first call after t and its answer.
func (cc *countingCaller) mark(t time.Time) {
	cc.tried.Store(0)
	cc.answered.Store(0)
	cc.since.Store(t.UnixNano())
}

// Call is trustdclient.Client's Call, counted.
func (cc *countingCaller) Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error) {
	began := time.Now().UnixNano()
	after := cc.since.Load() != 0 && began >= cc.since.Load()

	if after {
		cc.tried.CompareAndSwap(0, began)
	}

	ep, err := cc.c.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		return call(ctx, answeringConn{ClientConnInterface: conn, answer: func() { cc.answer(after) }})
	})
	cc.n.calls.Add(1)

	switch {
	case trustdclient.IsLost(err):
		cc.n.lost.Add(1)

		return ep, err
	case err != nil:
		cc.n.failed.Add(1)
		cc.n.causes.add(err)

		return ep, err
	}

	cc.answer(after)

	return ep, nil
}

// Open is trustdclient.Client's Open: a control plane that holds the
// worker's entry for its connection is not sent heartbeats while that is
// open.
func (cc *countingCaller) Open(endpoint, local string) bool { return cc.c.Open(endpoint, local) }

// answer records that a call was answered now: it returned, or a stream
// it holds (the revocation watch) brought a message. after says whether
// the call began after the mark.
func (cc *countingCaller) answer(after bool) {
	now := time.Now().UnixNano()
	cc.last.Store(now)

	if after {
		cc.answered.CompareAndSwap(0, now)
	}
}

// answeringConn calls answer when a stream made on it is accepted (its
// headers) and at every message it brings, so that a watch held open
// counts as answered once its control plane accepts it, not only when it
// ends.
type answeringConn struct {
	grpc.ClientConnInterface

	answer func()
}

func (a answeringConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	st, err := a.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}

	return answeringStream{ClientStream: st, answer: a.answer}, nil
}

// Target names the endpoint in the workers' logs, as the connection does.
func (a answeringConn) Target() string {
	if t, ok := a.ClientConnInterface.(interface{ Target() string }); ok {
		return t.Target()
	}

	return ""
}

type answeringStream struct {
	grpc.ClientStream

	answer func()
}

// Header waits for the stream's headers: trustd sends them once it
// accepted the watch, and a watch resumed at the revision the control
// plane has brings no message until the next revocation.
func (s answeringStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err == nil && md != nil {
		s.answer()
	}

	return md, err
}

func (s answeringStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.answer()
	}

	return err
}

// waited is how long the worker waited for an answer after the mark: from
// the start of its first call since to the first answer of such a call;
// ok is false while none was answered.
func (cc *countingCaller) waited() (time.Duration, bool) {
	tried, answered := cc.tried.Load(), cc.answered.Load()
	if tried == 0 || answered == 0 {
		return 0, false
	}

	return time.Duration(answered - tried), true
}

// worker is one hollow worker: a worker's client side, with the packages a
// machined worker uses (join, renewal, trustdclient, membership,
// revocation), from an address of its own, with no apid, containerd or
// service processes.
type worker struct {
	addr   string
	joiner *join.Client
	caller *countingCaller
	// sender sends the worker's heartbeats, and says whether a control
	// plane holds its entry.
	sender *membership.Sender
	list   *revocation.List
	n      *counters

	cert    atomic.Pointer[tls.Certificate]
	revoked atomic.Int64 // unix nanoseconds the watched serial was seen; 0 until then

	mu      sync.Mutex
	watched string // the serial whose arrival the worker records
}

// newWorker makes a hollow worker calling from addr, joining with base.
func newWorker(addr string, base join.Config, n *counters, log *slog.Logger) (*worker, error) {
	// As machined's worker asks: its address as the common name, then its
	// address and its hostname as SANs, calling from its address.
	cfg := base
	cfg.Hostname, cfg.Source, cfg.SANs, cfg.Logger = addr, addr, []string{addr, hostnameOf(addr)}, log

	j, err := join.New(cfg)
	if err != nil {
		return nil, err
	}

	list, err := revocation.OpenList(revocation.ListConfig{})
	if err != nil {
		return nil, err
	}

	w := &worker{addr: addr, joiner: j, list: list, n: n}

	tc, err := trustdclient.New(trustdclient.Config{
		Endpoints:   base.Endpoints,
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return w.current() },
		AcceptedCAs: func() *x509.CertPool { return base.CAs.Pool() },
		Source:      addr,
	})
	if err != nil {
		return nil, err
	}

	w.caller = &countingCaller{c: tc, n: n}
	w.sender = &membership.Sender{Trustd: w.caller}

	return w, nil
}

var errNotJoined = errors.New("scale: the hollow worker has not joined yet")

func (w *worker) current() (*tls.Certificate, error) {
	if c := w.cert.Load(); c != nil {
		return c, nil
	}

	return nil, errNotJoined
}

// join obtains a node certificate through trustd with the token, as a
// worker's first boot and each renewal do, and puts it in use.
func (w *worker) join(ctx context.Context) (*x509.Certificate, error) {
	res, err := w.joiner.Join(ctx)
	if err != nil {
		return nil, err
	}

	pair, err := tls.X509KeyPair(res.CertPEM, res.KeyPEM)
	if err != nil {
		return nil, err
	}

	pair.Leaf = res.Certificate
	w.cert.Store(&pair)

	return res.Certificate, nil
}

// run keeps the worker alive until ctx ends: renewal at half-life,
// heartbeats every interval and the revocation watch, each through the
// packages machined's worker runs them with.
func (w *worker) run(ctx context.Context, interval time.Duration, log *slog.Logger) error {
	// Its connections go with it: 10,000 workers' left open kept the
	// harness from the descriptors it destroys the cluster with.
	defer func() { _ = w.caller.c.Close() }()

	cur, err := w.current()
	if err != nil {
		return err
	}

	r, err := renewal.New(renewal.Config{Current: cur.Leaf, Logger: log, Renew: func(ctx context.Context) (*x509.Certificate, error) {
		c, err := w.join(ctx)
		w.n.renewals.Add(1)

		if err != nil {
			w.n.renewFailed.Add(1)
		}

		return c, err
	}})
	if err != nil {
		return err
	}

	p, err := revocation.NewWatcher(revocation.PollerConfig{Trustd: w.caller, List: w.list, Logger: log})
	if err != nil {
		return err
	}

	sender := w.sender
	entry := &membership.Member{
		Hostname: hostnameOf(w.addr), Addresses: []string{w.addr}, Version: version.Get().Tag,
		Interval: durationpb.New(interval), TimeSynced: true,
	}

	var wg sync.WaitGroup

	wg.Go(func() { _ = r.Run(ctx) }) //nolint:errcheck // it ends with ctx
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() {
		membership.Until(ctx, clock.Real(), interval, log, func(ctx context.Context) error { return sender.Send(ctx, entry) })
	})
	wg.Go(func() { w.watch(ctx) })
	wg.Wait()

	return nil
}

// watchFor makes the worker record when serial reaches its list.
func (w *worker) watchFor(serial string) {
	w.mu.Lock()
	w.watched = serial
	w.mu.Unlock()
	w.revoked.Store(0)
	w.seen()
}

// watch records, at each change of the worker's list, whether the watched
// serial arrived.
func (w *worker) watch(ctx context.Context) {
	for {
		changed := w.list.Changed()
		w.seen()

		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

func (w *worker) seen() {
	w.mu.Lock()
	s := w.watched
	w.mu.Unlock()

	if s == "" || w.revoked.Load() != 0 {
		return
	}

	if _, ok := revocation.Serials(w.list.Entries())[s]; ok {
		w.revoked.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// hostnameOf is a hollow worker's hostname: its address as a DNS label.
func hostnameOf(addr string) string { return "hollow-" + strings.ReplaceAll(addr, ".", "-") }
