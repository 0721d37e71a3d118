package clusterhealth

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/membership"
)

func member(host, addr, role string) *membership.Member {
	return &membership.Member{Hostname: host, Addresses: []string{addr}, Role: role, TimeSynced: true, AcceptedCas: "aa"}
}

func TestCheckEtcd(t *testing.T) {
	members := []*membership.Member{
		member("cp-1", "10.0.0.1", membership.RoleControlPlane),
		member("cp-2", "10.0.0.2", membership.RoleControlPlane),
		member("w-1", "10.0.0.5", membership.RoleWorker),
	}
	healthy := []etcd.MemberHealth{{ID: 1, Name: "cp-1", Leader: 1}, {ID: 2, Name: "cp-2", Leader: 1}}

	for _, tt := range []struct {
		name   string
		health []etcd.MemberHealth
		err    error
		want   string // "" is healthy
	}{
		{"healthy", healthy, nil, ""},
		{"not answering", nil, errors.New("no quorum"), "not answering: no quorum"},
		{"control plane not a member", healthy[:1], nil, "control plane cp-2 is no etcd member"},
		{"learner", []etcd.MemberHealth{healthy[0], {ID: 2, Name: "cp-2", Leader: 1, Learner: true}}, nil, "member cp-2 is a learner"},
		{"member down", []etcd.MemberHealth{healthy[0], {ID: 2, Name: "cp-2", Err: errors.New("not answering at https://10.0.0.2:2379")}}, nil, "member cp-2: not answering"},
		{"two leaders", []etcd.MemberHealth{healthy[0], {ID: 2, Name: "cp-2", Leader: 2}}, nil, "2 different leaders"},
		{"no leader", []etcd.MemberHealth{{ID: 1, Name: "cp-1"}, {ID: 2, Name: "cp-2"}}, nil, "no leader"},
		{"etcd member without an entry", append(healthy, etcd.MemberHealth{ID: 3, Name: "cp-3", Leader: 1}), nil, "etcd member cp-3 has no control-plane entry"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := checkEtcd(members, tt.health, tt.err)
			if (tt.want == "") != (f.Problem == "") || !strings.Contains(f.Problem, tt.want) {
				t.Fatalf("finding %q, want %q", f, tt.want)
			}
		})
	}
}

func TestCheckNode(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	up := func(id string) *machine.ServiceInfo {
		return &machine.ServiceInfo{Id: id, State: "Running", Health: &machine.ServiceHealth{Healthy: true}}
	}
	fresh := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(23 * time.Hour)}
	cp := member("cp-1", "10.0.0.1", membership.RoleControlPlane)
	worker := member("w-1", "10.0.0.5", membership.RoleWorker)
	unsynced := member("w-2", "10.0.0.6", membership.RoleWorker)
	unsynced.TimeSynced = false

	for _, tt := range []struct {
		name  string
		m     *membership.Member
		probe Probe
		err   error
		want  string
	}{
		{"worker up", worker, Probe{Services: []*machine.ServiceInfo{up("apid"), up("certificates")}, Certificate: fresh}, nil, ""},
		{"control plane up", cp, Probe{Services: []*machine.ServiceInfo{up("apid"), up("trustd"), up("etcd")}, Certificate: fresh}, nil, ""},
		{"apid not answering", worker, Probe{}, errors.New("no reply within 5s"), "node w-1 (10.0.0.5): apid not answering: no reply within 5s"},
		{"service down", cp, Probe{Services: []*machine.ServiceInfo{up("apid"), up("trustd"), {Id: "etcd", State: "Finished"}}}, nil, "service etcd is Finished"},
		{"service unhealthy", worker, Probe{Services: []*machine.ServiceInfo{{Id: "apid", State: "Running", Health: &machine.ServiceHealth{LastMessage: "refused"}}}}, nil, "service apid is unhealthy: refused"},
		{"control plane without trustd", cp, Probe{Services: []*machine.ServiceInfo{up("apid"), up("etcd")}}, nil, "service trustd is missing"},
		{"time not synced", unsynced, Probe{Services: []*machine.ServiceInfo{up("apid")}}, nil, "time not synced"},
		{"certificate past three quarters", worker, Probe{Services: []*machine.ServiceInfo{up("apid")}, Certificate: &x509.Certificate{NotBefore: now.Add(-19 * time.Hour), NotAfter: now.Add(5 * time.Hour)}}, nil, "node certificate expires in 5h0m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := checkNode(tt.m, tt.probe, tt.err, now)
			if (tt.want == "") != (f.Problem == "") || !strings.Contains(f.String(), tt.want) {
				t.Fatalf("finding %q, want %q", f, tt.want)
			}
		})
	}
}

func TestCheckCAsAndExpected(t *testing.T) {
	a, b := member("cp-1", "10.0.0.1", membership.RoleControlPlane), member("w-1", "10.0.0.5", membership.RoleWorker)

	if f := checkCAs([]*membership.Member{a, b}); f.Problem != "" {
		t.Fatalf("same CAs: %q", f)
	}

	b.AcceptedCas = "bb"
	if f := checkCAs([]*membership.Member{a, b}); !strings.Contains(f.Problem, "aa on cp-1; bb on w-1") {
		t.Fatalf("different CAs: %q", f)
	}

	got := checkExpected([]*membership.Member{a, b}, []string{"10.0.0.1", "w-1"}, []string{"w-9"})
	if len(got) != 2 || got[0].String() != "node w-1: is a worker, expected a controlplane" || got[1].String() != "node w-9: not a member of the cluster" {
		t.Fatalf("checkExpected = %v", got)
	}
}
