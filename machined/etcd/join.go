package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// errNoCluster: no other control plane answers with a cluster.
var errNoCluster = errors.New("no etcd cluster at the control-plane endpoints")

// withPeers runs fn with a client of one voting member among the other
// control planes: a learner, or a member not started, forwards no
// membership change. Endpoints that refuse connections are skipped at once.
func (e *Etcd) withPeers(ctx context.Context, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	var last error = errNoCluster

	for _, ep := range e.peerEndpoints() {
		cli, err := e.voter(ctx, ep)
		if err != nil {
			last = fmt.Errorf("%w: %w", errNoCluster, err)

			continue
		}

		err = fn(ctx, cli)
		cli.Close() //nolint:errcheck // short-lived client

		return err
	}

	return last
}

// voter returns a client of ep when a voting member answers there.
func (e *Etcd) voter(ctx context.Context, ep string) (*clientv3.Client, error) {
	var d net.Dialer

	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(ep, "https://"))
	if err != nil {
		return nil, err
	}

	conn.Close() //nolint:errcheck // probe

	cli, err := e.newClient(ep)
	if err != nil {
		return nil, err
	}

	st, err := cli.Status(ctx, ep)

	switch {
	case err != nil:
	case st.IsLearner:
		err = errors.New(ep + " is a learner")
	case len(st.Errors) > 0:
		err = fmt.Errorf("%s: %v", ep, st.Errors)
	}

	if err != nil {
		cli.Close() //nolint:errcheck // not used

		return nil, err
	}

	return cli, nil
}

// peerMembers lists the cluster's members through the other control planes.
func (e *Etcd) peerMembers(ctx context.Context) ([]member, error) {
	var out []member

	err := e.withPeers(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoCluster, err)
		}

		out = members(resp.Members)

		return nil
	})

	return out, err
}

func members(ms []*etcdserverpb.Member) []member {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		out = append(out, member{id: m.ID, name: m.Name, peerURLs: m.PeerURLs, learner: m.IsLearner})
	}

	return out
}

// join adds this node as a learner of the cluster the other control planes
// run (or takes up the learner an earlier attempt added and never started)
// and plans a start with the existing cluster. It also returns where the
// member stands among the learners joining with it (see awaitEarlier).
func (e *Etcd) join(ctx context.Context) (startPlan, joinOrder, error) {
	var (
		plan  startPlan
		order joinOrder
	)

	err := e.withPeers(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoCluster, err)
		}

		list := members(resp.Members)

		id, list, earlier, err := e.addSelf(ctx, cli, list)
		if err != nil {
			return err
		}

		order = joinOrder{self: id, earlier: earlier}

		// Another control plane may have joined since: the member starts
		// with the membership of now, which etcd checks against its own.
		if resp, err = cli.MemberList(ctx); err == nil {
			list = members(resp.Members)
		}

		if err = e.saveMemberID(id); err != nil {
			return err
		}

		e.log.Info("joining the etcd cluster as a learner", slog.String(logkey.MemberID, formatID(id)))

		plan = startPlan{state: existingCluster, initial: initialCluster(list, id, e.cfg.Name)}

		return nil
	})

	return plan, order, err
}

// joinOrder is a joining member's ID and the learners added before it that
// had not started then.
type joinOrder struct {
	self    uint64
	earlier []uint64
}

// unstarted returns the IDs of the members of list, other than self, that
// have not started (etcd names a member once it has published itself).
func unstarted(list []member, self uint64) []uint64 {
	var out []uint64

	for _, m := range list {
		if m.id != self && m.name == "" {
			out = append(out, m.id)
		}
	}

	return out
}

// awaitEarlier waits, up to learnerWait, until none of the learners added
// before this one is still to start, and returns the start plan again with
// the names they published. A member starting with an existing cluster asks
// every other member for its version before it serves: a learner whose
// server has bound its peer port but is itself still asking the others
// answers nothing, and each question waits out etcd's request timeout
// (7 s by default, twice). Control planes that joined together asked each
// other and lost 14 s; one at a time, in the order they were added, each
// finds the earlier one serving and the later ones not yet listening
// (refused at once). An earlier learner that never starts costs the wait
// and no more.
func (e *Etcd) awaitEarlier(ctx context.Context, plan startPlan, order joinOrder, notify runner.Notify) (startPlan, error) {
	if len(order.earlier) == 0 {
		return plan, nil
	}

	deadline := e.cfg.Clock.Now().Add(learnerWait)
	shown := false

	for {
		list, err := e.peerMembers(ctx)
		if err == nil {
			waiting := slices.ContainsFunc(unstarted(list, order.self), func(m uint64) bool { return slices.Contains(order.earlier, m) })
			if !waiting {
				if slices.ContainsFunc(list, func(m member) bool { return m.id == order.self }) {
					plan.initial = initialCluster(list, order.self, e.cfg.Name)
				}

				return plan, nil
			}
		}

		if !e.cfg.Clock.Now().Before(deadline) {
			e.log.Warn("a control plane that joined before this one has not started its member; starting anyway")

			return plan, nil
		}

		if !shown {
			notify(false, "waiting for the control plane that joined before this one to start its member")
			shown = true
		}

		t := e.cfg.Clock.NewTimer(learnerPoll)

		select {
		case <-ctx.Done():
			t.Stop()

			return startPlan{}, ctx.Err()
		case <-t.C():
		}
	}
}

// addSelf returns this node's member ID and the membership, adding the
// node as a learner first, and the learners added before it that had not
// started: those of the membership etcd answered the addition with, which
// holds the members added before this one and none after. A member of this
// node's peer URL that has started before has lost its data with this
// node: it is removed and added afresh. A learner an earlier attempt added
// is taken up with no earlier learners, since which came before it is not
// known.
func (e *Etcd) addSelf(ctx context.Context, cli *clientv3.Client, list []member) (uint64, []member, []uint64, error) {
	i := slices.IndexFunc(list, func(m member) bool { return slices.Contains(m.peerURLs, e.peerURL()) })

	if i >= 0 && list[i].name == "" {
		return list[i].id, list, nil, nil
	}

	if i >= 0 {
		e.log.Warn("removing this node's old member, whose data is gone", slog.String(logkey.MemberID, formatID(list[i].id)))

		if _, err := cli.MemberRemove(ctx, list[i].id); err != nil {
			return 0, nil, nil, fmt.Errorf("removing this node's old member: %w", translate(err))
		}
	}

	// Raft holds one membership change at a time and drops a second
	// proposed meanwhile without an answer: of two control planes adding
	// themselves at once, one waits for nothing. It gives up soon and asks
	// again (an addition that did apply is then found and taken up).
	addCtx, cancel := context.WithTimeout(ctx, memberAddTimeout)
	defer cancel()

	added, err := cli.MemberAddAsLearner(addCtx, []string{e.peerURL()})
	if err != nil {
		if errors.Is(err, rpctypes.ErrTooManyLearners) {
			return 0, nil, nil, errors.New("another control plane is joining; waiting for its promotion")
		}

		return 0, nil, nil, fmt.Errorf("adding this node as a learner: %w", translate(err))
	}

	list = members(added.Members)

	return added.Member.ID, list, unstarted(list, added.Member.ID), nil
}

// removed reports whether the other control planes answer with a cluster
// that no longer holds this node's member. Unknown (no answer, no ID kept)
// counts as not removed: the member then starts from its data.
func (e *Etcd) removed(ctx context.Context) bool {
	id, ok := e.memberID()
	if !ok {
		return false
	}

	list, err := e.peerMembers(ctx)
	if err != nil {
		return false
	}

	return !slices.ContainsFunc(list, func(m member) bool { return m.id == id })
}

// afterStart follows the started member: it records the member's ID and,
// while the member is a learner, asks for its promotion until etcd grants it
// (once the learner has caught up with the leader).
func (e *Etcd) afterStart(ctx context.Context) {
	for {
		st, err := e.localStatus(ctx)
		if err == nil {
			e.shareDataDirs()

			if have, _ := e.memberID(); have != st.Header.MemberId {
				if err := e.saveMemberID(st.Header.MemberId); err != nil {
					e.log.Warn("recording the member ID", slog.String(logkey.Error, err.Error()))
				}
			}

			if !st.IsLearner || e.promote(ctx, st.Header.MemberId) {
				return
			}
		}

		t := e.cfg.Clock.NewTimer(promotePeriod)

		select {
		case <-ctx.Done():
			t.Stop()

			return
		case <-t.C():
		}
	}
}

// promote asks the cluster, through the other control planes (a learner
// forwards no membership changes), to promote the learner id; it reports
// whether the member is a voter now.
func (e *Etcd) promote(ctx context.Context, id uint64) bool {
	err := e.withPeers(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberPromote(ctx, id)

		return err
	})

	switch {
	case err == nil:
		e.log.Info("promoted to a voting member", slog.String(logkey.MemberID, formatID(id)))

		return true
	case errors.Is(err, rpctypes.ErrMemberNotLearner):
		return true
	default:
		return false
	}
}

func (e *Etcd) localStatus(ctx context.Context) (*clientv3.StatusResponse, error) {
	var st *clientv3.StatusResponse

	err := e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		var err error

		st, err = cli.Status(ctx, e.ClientURL())

		return err
	})

	return st, err
}

func (e *Etcd) memberID() (uint64, bool) {
	data, err := os.ReadFile(e.memberFile())
	if err != nil {
		return 0, false
	}

	id, err := strconv.ParseUint(strings.TrimSpace(string(data)), 16, 64)

	return id, err == nil
}

func (e *Etcd) saveMemberID(id uint64) error {
	return atomicfile.Write(e.memberFile(), []byte(formatID(id)+"\n"), 0o600, atomicfile.Options{Overwrite: true})
}

// dropData removes the member's data and its recorded ID.
func (e *Etcd) dropData() error {
	for _, p := range []string{e.dataDir(), e.memberFile()} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("etcd: removing %s: %w", p, err)
		}
	}

	return nil
}

// shareDataDirs lets trustd's user see whether the WAL exists (see
// Config.ShareFiles); a failure is logged, trustd then stays on its local
// token store.
func (e *Etcd) shareDataDirs() {
	if e.cfg.ShareFiles == nil {
		return
	}

	if err := e.cfg.ShareFiles(); err != nil {
		e.log.Warn("sharing the data folders with trustd", slog.String(logkey.Error, err.Error()))
	}
}
