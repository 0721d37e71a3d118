package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/logkey"
)

// afterStart follows the started member: it records the member's ID and,
// while the member is a learner, asks for its promotion until etcd grants
// it. The leader grants it once the learner has caught up with its log and
// refuses before (see promoted), so a refusal is "not yet": the learner
// asks again after promoteRetry, doubling up to promotePeriod, and is a
// voter within about promoteRetry of catching up, while one that takes
// long to catch up asks twice a second. For promoteHold after the start it
// first waits, looking every learnerPoll, until every control plane of the
// config is a member (see absentControlPlanes).
func (e *Etcd) afterStart(ctx context.Context) {
	p := &promotion{holdUntil: e.cfg.Clock.Now().Add(promoteHold), wait: promoteRetry}

	for {
		st, err := e.localStatus(ctx)
		if err == nil {
			e.keepMemberID(st.Header.MemberId)

			if !st.IsLearner {
				return
			}

			if err = e.promote(ctx, st.Header.MemberId, e.cfg.Clock.Now().Before(p.holdUntil)); promoted(err) {
				return
			}

			if errors.Is(err, errControlPlanesAbsent) && !p.held {
				e.log.Info("holding the promotion until the other control planes have joined", slog.String(logkey.Error, err.Error()))
				p.held = true
			}
		}

		t := e.cfg.Clock.NewTimer(p.after(err))

		select {
		case <-ctx.Done():
			t.Stop()

			return
		case <-t.C():
		}
	}
}

// keepMemberID records the ID of the started member, and lets trustd's
// user see its data folders.
func (e *Etcd) keepMemberID(id uint64) {
	e.shareDataDirs()

	if have, _ := e.memberID(); have != id {
		if err := e.saveMemberID(id); err != nil {
			e.log.Warn("recording the member ID", slog.String(logkey.Error, err.Error()))
		}
	}
}

// promotion is where a learner's requests for promotion stand.
type promotion struct {
	holdUntil time.Time     // the end of the hold (see absentControlPlanes)
	wait      time.Duration // the wait after the next refusal
	held      bool          // the hold has been logged
}

// after returns the wait before the next request, given the last one's
// answer: learnerPoll while the promotion is held, else the doubling wait.
func (p *promotion) after(err error) time.Duration {
	if errors.Is(err, errControlPlanesAbsent) {
		return learnerPoll
	}

	d := p.wait
	p.wait = min(2*p.wait, promotePeriod)

	return d
}

// errControlPlanesAbsent: a learner holds its promotion while control
// planes of the config are not members yet.
var errControlPlanesAbsent = errors.New("control planes of the config are not members yet")

// promote asks the cluster, through the other control planes (a learner
// forwards no membership changes), to promote the learner id; with hold,
// only once absentControlPlanes finds none. It returns etcd's answer
// (see promoted).
func (e *Etcd) promote(ctx context.Context, id uint64, hold bool) error {
	err := e.withPeers(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		if hold {
			resp, err := cli.MemberList(ctx)
			if err != nil {
				return err
			}

			if absent := absentControlPlanes(e.cfg.Endpoints, members(resp.Members)); len(absent) > 0 {
				return fmt.Errorf("%w: %s", errControlPlanesAbsent, strings.Join(absent, ", "))
			}
		}

		// Raft drops a membership change proposed while another is
		// pending without an answer: the call gives up soon, as an
		// addition does, and the learner asks again.
		ctx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
		defer cancel()

		_, err := cli.MemberPromote(ctx, id)

		return err
	})

	if err == nil {
		e.log.Info("promoted to a voting member", slog.String(logkey.MemberID, formatID(id)))
	}

	return err
}

// absentControlPlanes returns the control-plane endpoints of the config,
// given as addresses, on which no member of list has its peer URL. etcd
// refuses a new member, a learner too, until a quorum of the voters it
// would make has been connected for five seconds (learners.go): once a
// learner is promoted, a control plane that finds the cluster a moment
// later waits that long to join. So the first learners hold their
// promotion, for promoteHold at most, until the control planes booting
// with them have joined. An endpoint given as a name is left out: which
// members it stands for is not known.
func absentControlPlanes(endpoints []string, list []member) []string {
	hosts := map[netip.Addr]bool{}

	for _, m := range list {
		for _, u := range m.peerURLs {
			if pu, err := neturl.Parse(u); err == nil {
				if a, err := netip.ParseAddr(pu.Hostname()); err == nil {
					hosts[a.Unmap()] = true
				}
			}
		}
	}

	var out []string

	for _, ep := range endpoints {
		host := ep
		if h, _, err := net.SplitHostPort(ep); err == nil {
			host = h
		}

		if a, err := netip.ParseAddr(host); err == nil && !hosts[a.Unmap()] && !slices.Contains(out, a.Unmap().String()) {
			out = append(out, a.Unmap().String())
		}
	}

	return out
}

// promoted tells, from the answer to a promotion, whether the member is a
// voter: granted, or a voter already (an earlier answer was lost). Any
// refusal is "not yet": etcd refuses a learner that has not caught up with
// the leader's log (ErrMemberLearnerNotReady) and a promotion that would
// leave fewer started voters than a quorum (ErrMemberNotEnoughStarted); a
// member that knows no leader cannot forward it, and a change dropped by
// Raft times out. None of them promotes anything, so asking again is safe.
func promoted(err error) bool {
	return err == nil || errors.Is(err, rpctypes.ErrMemberNotLearner)
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
