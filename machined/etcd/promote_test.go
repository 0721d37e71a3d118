package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestPromoted: a learner is a voter once etcd granted the promotion or
// says the member is no learner; every refusal and every failure to get an
// answer is "not yet", asked again.
func TestPromoted(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"granted", nil, true},
		{"a voter already", rpctypes.ErrMemberNotLearner, true},
		{"not caught up", rpctypes.ErrMemberLearnerNotReady, false},
		{"too few started voters", rpctypes.ErrMemberNotEnoughStarted, false},
		{"no leader", rpctypes.ErrNoLeader, false},
		{"dropped by Raft", context.DeadlineExceeded, false},
		{"no voter answers", fmt.Errorf("%w: connection refused", errNoCluster), false},
		{"refusal wrapped", fmt.Errorf("promoting: %w", rpctypes.ErrMemberLearnerNotReady), false},
		{"answer wrapped", fmt.Errorf("promoting: %w", rpctypes.ErrMemberNotLearner), true},
		{"something else", errors.New("etcdserver: request timed out"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := promoted(tt.err); got != tt.want {
				t.Fatalf("promoted(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestAbsentControlPlanes: the endpoints given as addresses that no
// member's peer URL is on, each once, self included when not a member;
// ports of endpoints and members do not matter, names are left out.
func TestAbsentControlPlanes(t *testing.T) {
	list := []member{
		{id: 1, name: "cp-1", peerURLs: []string{"https://10.0.0.2:2380"}},
		{id: 2, peerURLs: []string{"https://10.0.0.3:2380"}, learner: true},
		{id: 3, name: "cp-v6", peerURLs: []string{"https://[fd00::4]:2380"}},
	}

	for _, tt := range []struct {
		name      string
		endpoints []string
		want      []string
	}{
		{"every control plane a member", []string{"10.0.0.2", "10.0.0.3:50000", "fd00::4"}, nil},
		{"one still to join", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}, []string{"10.0.0.4"}},
		{"given twice", []string{"10.0.0.4", "10.0.0.4:50001"}, []string{"10.0.0.4"}},
		{"an IPv6 address with a port", []string{"[fd00::5]:50000"}, []string{"fd00::5"}},
		{"a name", []string{"cp.example", "cp.example:50000"}, nil},
		{"none", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := absentControlPlanes(tt.endpoints, list); !slices.Equal(got, tt.want) {
				t.Fatalf("absent = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPromotionWaits: a refused promotion is asked again after
// promoteRetry, doubling up to promotePeriod; a held one every learnerPoll,
// which leaves the doubling where it was.
func TestPromotionWaits(t *testing.T) {
	p := &promotion{wait: promoteRetry}
	absent := fmt.Errorf("%w: 10.0.0.4", errControlPlanesAbsent)

	var got []time.Duration
	for _, err := range []error{absent, absent, rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberLearnerNotReady, absent,
		rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberLearnerNotReady, errNoCluster, rpctypes.ErrNoLeader} {
		got = append(got, p.after(err))
	}

	want := []time.Duration{learnerPoll, learnerPoll, promoteRetry, 2 * promoteRetry, learnerPoll,
		4 * promoteRetry, 8 * promoteRetry, promotePeriod, promotePeriod, promotePeriod}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}
