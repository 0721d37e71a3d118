package cluster_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/client/cluster"
)

var until = time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)

func member(host string, addrs ...string) *membership.Member {
	return &membership.Member{Hostname: host, Addresses: addrs}
}

func worker(host string, addrs ...string) *membership.CertifiedNode {
	return &membership.CertifiedNode{Hostname: host, Addresses: addrs, Role: cluster.RoleWorker, NotAfter: timestamppb.New(until)}
}

func controlPlane(host string, addrs ...string) *membership.CertifiedNode {
	return &membership.CertifiedNode{Hostname: host, Addresses: addrs, Role: cluster.RoleControlPlane}
}

func TestMissing(t *testing.T) {
	cp := controlPlane("cp-1", "10.0.0.1")

	for _, tt := range []struct {
		name      string
		members   []*membership.Member
		certified []*membership.CertifiedNode
		want      []string // messages
	}{
		{name: "empty"},
		{
			name:      "every node a member",
			members:   []*membership.Member{member("cp-1", "10.0.0.1"), member("worker-1", "10.0.0.5")},
			certified: []*membership.CertifiedNode{cp, worker("worker-1", "10.0.0.5")},
		},
		{
			name:      "matched by address (renamed member)",
			members:   []*membership.Member{member("cp-1", "10.0.0.1"), member("worker-x", "10.0.0.5")},
			certified: []*membership.CertifiedNode{cp, worker("worker-1", "10.0.1.5", "10.0.0.5")},
		},
		{
			name:      "matched by hostname (new address)",
			members:   []*membership.Member{member("cp-1", "10.0.0.1"), member("worker-1", "10.0.0.9")},
			certified: []*membership.CertifiedNode{cp, worker("worker-1", "10.0.0.5")},
		},
		{
			name:      "a worker gone",
			members:   []*membership.Member{member("cp-1", "10.0.0.1"), member("worker-1", "10.0.0.5")},
			certified: []*membership.CertifiedNode{cp, worker("worker-1", "10.0.0.5"), worker("worker-2", "10.0.0.6", "fd00::6")},
			want: []string{"worker worker-2 (10.0.0.6, fd00::6) holds a certificate of the cluster until 2026-11-29T02:00:00Z " +
				"but is not in the member list (gone, or unreachable): bring it back, or remove it with `aegisctl members remove worker-2`"},
		},
		{
			name:      "every worker gone, right after create",
			members:   []*membership.Member{member("cp-1", "10.0.0.1")},
			certified: []*membership.CertifiedNode{cp, worker("worker-1", "10.0.0.5"), worker("worker-2", "10.0.0.6")},
			want:      []string{"worker worker-1 (10.0.0.5)", "worker worker-2 (10.0.0.6)"},
		},
		{
			name:      "a control plane not listed",
			members:   []*membership.Member{member("cp-1", "10.0.0.1")},
			certified: []*membership.CertifiedNode{cp, controlPlane("cp-2", "10.0.0.2")},
			want: []string{"control plane cp-2 (10.0.0.2) is etcd's member but not in the member list: " +
				"bring it back, or remove it from etcd with `aegisctl etcd remove-member`"},
		},
		{
			name:      "an etcd member not started, known by address",
			members:   []*membership.Member{member("cp-1", "10.0.0.1")},
			certified: []*membership.CertifiedNode{cp, controlPlane("", "10.0.0.3")},
			want:      []string{"control plane 10.0.0.3 (10.0.0.3)"},
		},
		{
			name:      "an empty hostname matches nothing",
			members:   []*membership.Member{member("", "10.0.0.7")},
			certified: []*membership.CertifiedNode{{Addresses: []string{"10.0.0.8"}, Role: cluster.RoleWorker}},
			want:      []string{"until a time not known"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := cluster.Missing(&membership.Members{Members: tt.members}, &membership.CertifiedNodes{Nodes: tt.certified})

			if len(got) != len(tt.want) {
				t.Fatalf("Missing = %v, want %d nodes", got, len(tt.want))
			}

			for i, m := range got {
				if !strings.Contains(m.Message, tt.want[i]) || !slices.Contains(tt.certified, m.Node) {
					t.Fatalf("missing %d: %q, want %q", i, m.Message, tt.want[i])
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	members := &membership.Members{Members: []*membership.Member{member("cp-1", "10.0.0.1")}}
	certified := &membership.CertifiedNodes{Nodes: []*membership.CertifiedNode{controlPlane("cp-1", "10.0.0.1"), worker("worker-1", "10.0.0.5")}}
	failed := &common.Metadata{Hostname: "cp-1", Error: "rpc error: code = Unavailable desc = membership: etcd unavailable"}

	for _, tt := range []struct {
		name      string
		members   *membership.Members
		certified *membership.CertifiedNodes
		want      error
		text      string
	}{
		{name: "complete", members: members, certified: &membership.CertifiedNodes{Nodes: certified.GetNodes()[:1]}},
		{name: "a worker missing", members: members, certified: certified, want: cluster.ErrMissing, text: "\n  worker worker-1 (10.0.0.5)"},
		{name: "member list failed", members: &membership.Members{Metadata: failed}, certified: certified, want: cluster.ErrUnknown, text: "reading the member list: rpc error"},
		{name: "certified failed", members: members, certified: &membership.CertifiedNodes{Metadata: failed}, want: cluster.ErrUnknown, text: "etcd unavailable"},
		{name: "no replies", want: cluster.ErrUnknown, text: "not even a control plane"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := cluster.Check(tt.members, tt.certified)
			if !errors.Is(err, tt.want) || (err != nil && !strings.Contains(err.Error(), tt.text)) || (err == nil) != (tt.want == nil) {
				t.Fatalf("Check = %v, want %v with %q", err, tt.want, tt.text)
			}
		})
	}
}
