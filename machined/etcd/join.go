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
)

// errNoCluster: no other control plane answers with a cluster.
var errNoCluster = errors.New("no etcd cluster at the control-plane endpoints")

// errChangeUnanswered: the addition of this node got no answer within
// memberChangeTimeout, most likely dropped for another control plane's,
// proposed at the same moment; it is asked again at once.
var errChangeUnanswered = errors.New("the addition of this node as a learner got no answer (another membership change was under way); asking again")

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

		plan = joinPlan(list, id, e.cfg.Name)

		return nil
	})

	return plan, order, err
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
	addCtx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
	defer cancel()

	added, err := cli.MemberAddAsLearner(addCtx, []string{e.peerURL()})
	if err != nil {
		switch {
		case errors.Is(err, rpctypes.ErrTooManyLearners):
			return 0, nil, nil, errors.New("another control plane is joining; waiting for its promotion")
		case addCtx.Err() != nil && ctx.Err() == nil:
			return 0, nil, nil, errChangeUnanswered
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
