package clusterhealth

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/membership"
)

// Finding is the verdict on one subject of the check: a node, etcd, the
// cluster's CAs. Problem is empty when the subject is healthy.
type Finding struct {
	Subject string
	Problem string
	// Detail says what was checked when the subject is healthy.
	Detail string
}

func (f Finding) String() string {
	if f.Problem != "" {
		return f.Subject + ": " + f.Problem
	}

	return f.Subject + ": ok" + detail(f.Detail)
}

func detail(d string) string {
	if d == "" {
		return ""
	}

	return " (" + d + ")"
}

// nodeSubject names a member in findings: hostname and address.
func nodeSubject(m *membership.Member) string {
	return fmt.Sprintf("node %s (%s)", m.GetHostname(), m.GetAddresses()[0])
}

// checkEtcd: every control plane of the member list is an etcd voter that
// answers, every etcd member has an entry in the member list (else its
// node would go unchecked), no member reports an error, and all follow one
// leader that is one of them.
func checkEtcd(members []*membership.Member, health []etcd.MemberHealth, err error) Finding {
	f := Finding{Subject: "etcd"}
	if err != nil {
		f.Problem = "not answering: " + err.Error()

		return f
	}

	var problems []string

	byName := map[string]etcd.MemberHealth{}
	for _, h := range health {
		byName[h.Name] = h
	}

	listed := map[string]bool{}
	for _, m := range members {
		listed[m.GetHostname()] = m.GetRole() == membership.RoleControlPlane
	}

	for _, h := range health {
		if !listed[h.Name] {
			problems = append(problems, fmt.Sprintf("etcd member %s has no control-plane entry in the member list", h.Name))
		}
	}

	for _, m := range members {
		if m.GetRole() != membership.RoleControlPlane {
			continue
		}

		switch h, ok := byName[m.GetHostname()]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("control plane %s is no etcd member", m.GetHostname()))
		case h.Learner:
			problems = append(problems, fmt.Sprintf("member %s is a learner, not a voter", h.Name))
		}
	}

	leaders := map[uint64]bool{}
	ids := map[uint64]string{}

	for _, h := range health {
		ids[h.ID] = h.Name

		if h.Err != nil {
			problems = append(problems, fmt.Sprintf("member %s: %v", h.Name, h.Err))

			continue
		}

		leaders[h.Leader] = true
	}

	switch {
	case len(leaders) > 1:
		problems = append(problems, fmt.Sprintf("members follow %d different leaders", len(leaders)))
	case leaders[0]:
		problems = append(problems, "no leader")
	}

	if len(problems) > 0 {
		f.Problem = strings.Join(problems, "; ")

		return f
	}

	for l := range leaders {
		f.Detail = fmt.Sprintf("%d voters, leader %s", len(health), ids[l])
	}

	return f
}

// Probe is what a node's apid showed: its services and its server
// certificate.
type Probe struct {
	Services    []*machine.ServiceInfo
	Certificate *x509.Certificate
}

// checkNode judges one member from its probe and its entry.
func checkNode(m *membership.Member, p Probe, probeErr error, now time.Time) Finding {
	f := Finding{Subject: nodeSubject(m)}
	if probeErr != nil {
		f.Problem = "apid not answering: " + probeErr.Error()

		return f
	}

	problems := serviceProblems(p.Services, m.GetRole())

	if !m.GetTimeSynced() {
		problems = append(problems, "time not synced")
	}

	if c := p.Certificate; c != nil {
		life, left := c.NotAfter.Sub(c.NotBefore), c.NotAfter.Sub(now)
		if float64(left) <= MinCertLifeLeft*float64(life) {
			problems = append(problems, fmt.Sprintf("node certificate expires in %s, under a quarter of its %s life", left.Round(time.Second), life))
		}
	}

	f.Problem = strings.Join(problems, "; ")
	f.Detail = fmt.Sprintf("%d services up", len(p.Services))

	return f
}

// required are the services every node of a role runs.
func required(role string) []string {
	if role == membership.RoleControlPlane {
		return []string{"apid", "trustd", etcd.ServiceID}
	}

	return []string{"apid"}
}

// serviceProblems names each service that is not running and healthy, and
// each the role needs that is missing.
func serviceProblems(services []*machine.ServiceInfo, role string) []string {
	var problems []string

	for _, svc := range services {
		switch h := svc.GetHealth(); {
		case svc.GetState() != "Running":
			problems = append(problems, fmt.Sprintf("service %s is %s", svc.GetId(), svc.GetState()))
		case h != nil && !h.GetUnknown() && !h.GetHealthy():
			problems = append(problems, fmt.Sprintf("service %s is unhealthy: %s", svc.GetId(), h.GetLastMessage()))
		case h != nil && h.GetUnknown():
			problems = append(problems, fmt.Sprintf("service %s has not passed its health check yet", svc.GetId()))
		}
	}

	for _, id := range required(role) {
		if !slices.ContainsFunc(services, func(s *machine.ServiceInfo) bool { return s.GetId() == id }) {
			problems = append(problems, fmt.Sprintf("service %s is missing", id))
		}
	}

	return problems
}

// checkCAs: every member reports the same accepted CAs.
func checkCAs(members []*membership.Member) Finding {
	f := Finding{Subject: "accepted CAs"}
	groups := map[string][]string{}

	for _, m := range members {
		groups[m.GetAcceptedCas()] = append(groups[m.GetAcceptedCas()], m.GetHostname())
	}

	if len(groups) <= 1 {
		f.Detail = fmt.Sprintf("the same on %d nodes", len(members))

		return f
	}

	var sets []string

	for digest, hosts := range groups {
		short := digest
		if len(short) > 12 {
			short = short[:12]
		}

		if short == "" {
			short = "none"
		}

		sets = append(sets, fmt.Sprintf("%s on %s", short, strings.Join(hosts, ",")))
	}

	slices.Sort(sets)
	f.Problem = "nodes disagree: " + strings.Join(sets, "; ")

	return f
}

// checkExpected: every node the request names is a member of its role.
func checkExpected(members []*membership.Member, controlPlanes, workers []string) []Finding {
	var out []Finding

	for _, want := range []struct {
		nodes []string
		role  string
	}{{controlPlanes, membership.RoleControlPlane}, {workers, membership.RoleWorker}} {
		for _, n := range want.nodes {
			i := slices.IndexFunc(members, func(m *membership.Member) bool {
				return m.GetHostname() == n || slices.Contains(m.GetAddresses(), n)
			})

			switch {
			case i < 0:
				out = append(out, Finding{Subject: "node " + n, Problem: "not a member of the cluster"})
			case members[i].GetRole() != want.role:
				out = append(out, Finding{Subject: "node " + n, Problem: fmt.Sprintf("is a %s, expected a %s", members[i].GetRole(), want.role)})
			}
		}
	}

	return out
}
