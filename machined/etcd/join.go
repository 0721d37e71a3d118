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
// and plans a start with the existing cluster.
func (e *Etcd) join(ctx context.Context) (startPlan, error) {
	var plan startPlan

	err := e.withPeers(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", errNoCluster, err)
		}

		list := members(resp.Members)

		id, list, err := e.addSelf(ctx, cli, list)
		if err != nil {
			return err
		}

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

	return plan, err
}

// addSelf returns this node's member ID among list, adding it as a learner
// first. A member of this node's peer URL that has started before has lost
// its data with this node: it is removed and added afresh.
func (e *Etcd) addSelf(ctx context.Context, cli *clientv3.Client, list []member) (uint64, []member, error) {
	i := slices.IndexFunc(list, func(m member) bool { return slices.Contains(m.peerURLs, e.peerURL()) })

	if i >= 0 && list[i].name == "" {
		return list[i].id, list, nil
	}

	if i >= 0 {
		e.log.Warn("removing this node's old member, whose data is gone", slog.String(logkey.MemberID, formatID(list[i].id)))

		if _, err := cli.MemberRemove(ctx, list[i].id); err != nil {
			return 0, nil, fmt.Errorf("removing this node's old member: %w", translate(err))
		}
	}

	added, err := cli.MemberAddAsLearner(ctx, []string{e.peerURL()})
	if err != nil {
		if errors.Is(err, rpctypes.ErrTooManyLearners) {
			return 0, nil, errors.New("another control plane is joining; waiting for its promotion")
		}

		return 0, nil, fmt.Errorf("adding this node as a learner: %w", translate(err))
	}

	return added.Member.ID, members(added.Members), nil
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
