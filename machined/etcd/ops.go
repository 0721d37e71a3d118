package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ServiceControl stops and starts the etcd service, for leaving the cluster.
type ServiceControl interface {
	Stop(ctx context.Context, ids ...string) error
	Start(ids ...string) error
}

// MemberList lists the cluster's members as the local member knows them.
func (e *Etcd) MemberList(ctx context.Context) ([]*machine.EtcdMember, error) {
	var out []*machine.EtcdMember

	err := e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}

		for _, m := range resp.Members {
			out = append(out, &machine.EtcdMember{
				Id: m.ID, Hostname: m.Name, PeerUrls: m.PeerURLs, ClientUrls: m.ClientURLs, IsLearner: m.IsLearner,
			})
		}

		return nil
	})

	return out, err
}

// Status is the local member's status.
func (e *Etcd) Status(ctx context.Context) (*machine.EtcdMemberStatus, error) {
	st, err := e.localStatus(ctx)
	if err != nil {
		return nil, err
	}

	return &machine.EtcdMemberStatus{
		MemberId: st.Header.MemberId, ProtocolVersion: st.Version, StorageVersion: st.StorageVersion,
		DbSize: st.DbSize, DbSizeInUse: st.DbSizeInUse, Leader: st.Leader, RaftIndex: st.RaftIndex,
		RaftTerm: st.RaftTerm, RaftAppliedIndex: st.RaftAppliedIndex, Errors: st.Errors, IsLearner: st.IsLearner,
	}, nil
}

// Leave takes this node out of the cluster cleanly: after checking that the
// others keep quorum without it, it hands leadership on, stops the member,
// removes it through the others and drops its data. A reboot joins again.
func (e *Etcd) Leave(ctx context.Context, svc ServiceControl) error {
	st, err := e.localStatus(ctx)
	if err != nil {
		return err
	}

	self := st.Header.MemberId

	others, err := e.othersUp(ctx, self)
	if err != nil {
		return err
	}

	if st.Leader == self {
		if _, err := e.ForfeitLeadership(ctx); err != nil {
			return err
		}
	}

	if err := svc.Stop(ctx, ServiceID); err != nil {
		return err
	}

	err = e.withEndpoints(ctx, others, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberRemove(ctx, self)

		return err
	})
	if err != nil {
		_ = svc.Start(ServiceID)

		return fmt.Errorf("removing this member: %w", translate(err))
	}

	return e.dropData()
}

// CheckLeave refuses, as Leave would, a leave that would break quorum:
// the only voter, or one whose other voters are too few to answer.
func (e *Etcd) CheckLeave(ctx context.Context) error {
	st, err := e.localStatus(ctx)
	if err != nil {
		return err
	}

	_, err = e.othersUp(ctx, st.Header.MemberId)

	return err
}

// othersUp returns the client URLs of the other voters that answer, and
// refuses when they are too few to keep quorum without self.
func (e *Etcd) othersUp(ctx context.Context, self uint64) ([]string, error) {
	voters, err := e.otherVoters(ctx, self)
	if err != nil {
		return nil, err
	}

	if len(voters) == 0 {
		return nil, fmt.Errorf("%w: this is the cluster's only voting member", ErrQuorum)
	}

	up := e.answering(ctx, voters)
	if len(up) < len(voters)/2+1 {
		return nil, fmt.Errorf("%w: %d of the other %d voting members answer", ErrQuorum, len(up), len(voters))
	}

	return up, nil
}

// otherVoters lists the client URLs of the voters other than self.
func (e *Etcd) otherVoters(ctx context.Context, self uint64) ([]string, error) {
	var voters []string

	err := e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}

		for _, m := range resp.Members {
			if !m.IsLearner && m.ID != self && len(m.ClientURLs) > 0 {
				voters = append(voters, m.ClientURLs[0])
			}
		}

		return nil
	})

	return voters, err
}

// answering returns the URLs whose member answers a status call. Each is
// asked on its own, all at once, so that one that is down costs one dial
// timeout and no other member's answer.
func (e *Etcd) answering(ctx context.Context, urls []string) []string {
	answered := make([]bool, len(urls))

	var wg sync.WaitGroup

	for i, url := range urls {
		wg.Go(func() {
			answered[i] = e.withEndpoints(ctx, []string{url}, func(ctx context.Context, cli *clientv3.Client) error {
				sctx, cancel := context.WithTimeout(ctx, dialTimeout)
				defer cancel()

				_, err := cli.Status(sctx, url)

				return err
			}) == nil
		})
	}

	wg.Wait()

	var up []string

	for i, ok := range answered {
		if ok {
			up = append(up, urls[i])
		}
	}

	return up
}

// withEndpoints runs fn with a client of endpoints.
func (e *Etcd) withEndpoints(ctx context.Context, endpoints []string, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	cli, err := e.newClient(endpoints...)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // short-lived client

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	return fn(ctx, cli)
}

// RemoveMember removes the member id from the cluster.
func (e *Etcd) RemoveMember(ctx context.Context, id uint64) error {
	return e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}

		if !slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool { return m.ID == id }) {
			return fmt.Errorf("%w: %s", ErrMemberNotFound, formatID(id))
		}

		_, err = cli.MemberRemove(ctx, id)

		return err
	})
}

// ForfeitLeadership hands leadership to another started voter when the
// local member leads; it returns the new leader's name, empty when the
// local member did not lead.
func (e *Etcd) ForfeitLeadership(ctx context.Context) (string, error) {
	var leader string

	err := e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		st, err := cli.Status(ctx, e.ClientURL())
		if err != nil {
			return err
		}

		if st.Leader != st.Header.MemberId {
			return nil
		}

		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}

		for _, m := range resp.Members {
			if m.ID == st.Header.MemberId || m.IsLearner || m.Name == "" {
				continue
			}

			if _, err := cli.MoveLeader(ctx, m.ID); err == nil {
				leader = m.Name

				return nil
			}
		}

		return errors.New("etcd: no other voting member took the leadership")
	})

	return leader, err
}

// Defragment defragments the local member's backend.
func (e *Etcd) Defragment(ctx context.Context) error {
	return e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Defragment(ctx, e.ClientURL())

		return err
	})
}

// Alarms lists the cluster's alarms; with disarm set, it disarms each.
func (e *Etcd) Alarms(ctx context.Context, disarm bool) ([]*machine.EtcdMemberAlarm, error) {
	var out []*machine.EtcdMemberAlarm

	err := e.withLocal(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			return err
		}

		for _, a := range resp.Alarms {
			if disarm {
				if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
					return err
				}
			}

			out = append(out, &machine.EtcdMemberAlarm{MemberId: a.MemberID, Alarm: machine.EtcdMemberAlarm_AlarmType(a.Alarm)})
		}

		return nil
	})

	return out, err
}
