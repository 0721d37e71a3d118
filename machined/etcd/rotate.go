package etcd

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/logkey"
)

// etcd loads the CAs it trusts (--trusted-ca-file, --peer-trusted-ca-file)
// once, when it starts, for its clients and its peers alike; it reads its
// own certificates and keys at each handshake. So a rotation of the etcd
// CA changes the member's trust by a restart, one member of the cluster at
// a time, and its issuing CA by writing new certificates. The clients of
// the member (machined's, trustd's) read the trusted CAs at each handshake
// (internal/etcdtls) and follow without a restart.

// restartLockKey is the key of the lock a member holds in etcd while it
// restarts to load its trusted CAs: one member at a time in the cluster,
// whatever order the control planes are configured in.
const restartLockKey = "/aegis/etcd/restart-lock"

// ErrRestartRefused: restarting the local member now would take down a
// second member, or quorum.
var ErrRestartRefused = errors.New("etcd: restarting the member now would leave the cluster short")

// trustedPEM is the PEM bundle of the etcd CA and the accepted ones.
func (e *Etcd) trustedPEM() []byte {
	var b bytes.Buffer

	b.Write(bytes.TrimSpace(e.cfg.CA.CertPEM))
	b.WriteByte('\n')

	for _, c := range e.cfg.Accepted {
		b.Write(bytes.TrimSpace(ca.EncodeCertificate(c)))
		b.WriteByte('\n')
	}

	return b.Bytes()
}

// writeTrusted writes the trusted CAs where the member (at its next start)
// and its clients (at their next handshake) read them; the caller holds
// pkiMu. The file is public: it holds certificates only.
func (e *Etcd) writeTrusted() error {
	if err := atomicfile.Write(e.caFile(), e.trustedPEM(), 0o644, atomicfile.Options{Overwrite: true}); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}

	if e.cfg.ShareFiles != nil {
		if err := e.cfg.ShareFiles(); err != nil {
			return fmt.Errorf("etcd: sharing the trusted CAs: %w", err)
		}
	}

	return nil
}

// SetCAs puts new etcd CAs in effect in the member's files: the trusted CAs
// at once (the member loads them at its next start: RestartSlot), and
// when the issuing CA changed, the member's three certificates issued from
// it. Before the first issue of this run of machined, it only changes what
// that issue uses.
func (e *Etcd) SetCAs(issuing *ca.CA, accepted []*x509.Certificate) error {
	if issuing == nil {
		return errors.New("etcd: no etcd CA")
	}

	e.pkiMu.Lock()
	defer e.pkiMu.Unlock()

	reissue := !e.cfg.CA.Cert.Equal(issuing.Cert)
	e.cfg.CA, e.cfg.Accepted = issuing, slices.Clone(accepted)

	if !e.issued {
		return nil
	}

	if err := e.writeTrusted(); err != nil {
		return err
	}

	if !reissue {
		return nil
	}

	for _, name := range certNames {
		if _, err := e.issue(name); err != nil {
			return fmt.Errorf("etcd: re-issuing the %s certificate from the new etcd CA: %w", name, err)
		}
	}

	e.log.Info("etcd certificates re-issued from the new etcd CA")

	return nil
}

// loadedTrust tells OnTrust what the member loads as it starts (the file it
// is started with) and returns the call that tells of its end.
func (e *Etcd) loadedTrust() (ended func()) {
	if e.cfg.OnTrust == nil {
		return func() {}
	}

	e.pkiMu.Lock()
	data, err := os.ReadFile(e.caFile())
	e.pkiMu.Unlock()

	if err != nil {
		e.log.Warn("trusted etcd CAs not read", slog.String(logkey.Error, err.Error()))
	}

	e.cfg.OnTrust(data)

	return func() { e.cfg.OnTrust(nil) }
}

// Restarter restarts one of the node's services and returns once it has
// been started again.
type Restarter interface {
	Restart(ctx context.Context, id string) error
}

// RestartReport says how a rolling restart of the local member went.
type RestartReport struct {
	// Waited is the time spent waiting for another member's restart.
	Waited time.Duration
	// Down is from the stop of the member to its first linearizable read.
	Down time.Duration
}

// RestartSlot is the local member's turn to restart in a rolling
// restart: the cluster's restart lock, held from before the caller changes
// anything until Release, so that a change refused for a member down
// elsewhere is refused whole, and changes applied to every control plane
// at once take their turns.
type RestartSlot struct {
	e       *Etcd
	release func()
	waited  time.Duration
}

// AcquireRestart waits for the cluster's restart lock (at most
// restartTimeout) and, holding it, checks that the local member may
// restart now (restartAllowed); on a refusal it lets the lock go.
func (e *Etcd) AcquireRestart(ctx context.Context) (*RestartSlot, error) {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()

	cli, err := e.Client()
	if err != nil {
		return nil, err
	}

	start := e.cfg.Clock.Now()

	release, err := lockRestart(ctx, cli)
	if err != nil {
		return nil, translate(err)
	}

	slot := &RestartSlot{e: e, release: release, waited: e.cfg.Clock.Now().Sub(start)}

	if err := e.checkRestart(ctx); err != nil {
		slot.Release()

		return nil, err
	}

	return slot, nil
}

// Release lets the restart lock go; it may be called more than once.
func (s *RestartSlot) Release() {
	if s != nil && s.release != nil {
		s.release()
		s.release = nil
	}
}

// Restart restarts the local member so that it loads its trusted CAs and
// returns once it serves a linearizable read again, which it does only
// once it has applied what the leader had committed when the read was
// asked: caught up. It runs to its end (at most restartTimeout) even if
// ctx ends: a restart cut short after its stop would leave the member
// stopped.
func (s *RestartSlot) Restart(ctx context.Context, svc Restarter) (RestartReport, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()

	e := s.e
	rep := RestartReport{Waited: s.waited}
	down := e.cfg.Clock.Now()

	if err := svc.Restart(ctx, ServiceID); err != nil {
		return rep, fmt.Errorf("etcd: restarting the member: %w", err)
	}

	if err := e.waitHealthy(ctx); err != nil {
		return rep, err
	}

	rep.Down = e.cfg.Clock.Now().Sub(down)
	e.log.Info("etcd member restarted to load its trusted CAs",
		slog.Duration(logkey.RestartWaited, rep.Waited), slog.Duration(logkey.DownFor, rep.Down))

	return rep, nil
}

// checkRestart says whether the local member may restart now
// (restartAllowed), from the health of every member.
func (e *Etcd) checkRestart(ctx context.Context) error {
	members, err := e.Health(ctx)
	if err != nil {
		return err
	}

	self, _ := e.memberID()

	return restartAllowed(members, self)
}

// lockRestart takes the cluster's restart lock under a lease that ends
// restartLockTTL after machined stops renewing it (a crash), and returns
// its release. The lease is kept alive until the release whatever becomes
// of ctx, which bounds only the wait for the lock.
func lockRestart(ctx context.Context, cli *clientv3.Client) (func(), error) {
	// The lease is granted under callTimeout: without quorum the apply is
	// refused at once, not after the whole wait for the lock.
	gctx, cancel := context.WithTimeout(ctx, callTimeout)
	lease, err := cli.Grant(gctx, restartLockTTL)

	cancel()

	if err != nil {
		return nil, fmt.Errorf("etcd: the restart lock: %w", err)
	}

	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("etcd: the restart lock: %w", err)
	}

	mu := concurrency.NewMutex(sess, restartLockKey)
	if err := mu.Lock(ctx); err != nil {
		sess.Close() //nolint:errcheck // the lease expires anyway

		return nil, fmt.Errorf("etcd: the restart lock: %w", err)
	}

	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()

		_ = mu.Unlock(uctx)
		sess.Close() //nolint:errcheck // revokes the lease
	}, nil
}

// waitHealthy polls the local member's health until it answers or ctx ends.
func (e *Etcd) waitHealthy(ctx context.Context) error {
	for {
		err := e.healthy(ctx)
		if err == nil {
			return nil
		}

		t := e.cfg.Clock.NewTimer(restartPoll)

		select {
		case <-ctx.Done():
			t.Stop()

			return fmt.Errorf("etcd: the member restarted but is not healthy: %w", err)
		case <-t.C():
		}
	}
}

// restartAllowed decides whether the member self may restart now: every
// other voter answers (a second member down would be one too many for
// three), and without self the voters that answer still form a quorum.
// A learner counts for nothing; the only voter of a cluster may restart,
// as nothing else can make it load its trusted CAs.
func restartAllowed(members []MemberHealth, self uint64) error {
	i := slices.IndexFunc(members, func(m MemberHealth) bool { return m.ID == self })
	if i < 0 {
		return fmt.Errorf("%w: this node's member (%s) is not in the member list", ErrRestartRefused, formatID(self))
	}

	var voters, up int

	var down []string

	for _, m := range members {
		if m.Learner {
			continue
		}

		voters++

		switch {
		case m.ID == self:
		case m.Err != nil:
			down = append(down, fmt.Sprintf("%s (%v)", m.Name, m.Err))
		default:
			up++
		}
	}

	if members[i].Learner || voters == 1 {
		return nil
	}

	if len(down) > 0 || up < voters/2+1 {
		return fmt.Errorf("%w: %d of the %d other voters answer, %d needed; down: %s",
			ErrRestartRefused, up, voters-1, voters/2+1, strings.Join(down, ", "))
	}

	return nil
}
