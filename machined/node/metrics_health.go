package node

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/timesync"
)

// etcdStatusFunc asks the node's etcd member for its status; ok is false
// on a node without a member (a worker, a control plane before its first
// boot as one).
type etcdStatusFunc func(ctx context.Context) (st etcd.Status, ok bool, err error)

// etcdCollector reports the local etcd member as its Status call sees it,
// one call per scrape: whether it answers, its leader, its raft term and
// its database size, labelled by the member's name. The leader changes
// are those seen between two scrapes; the raft term counts the others.
type etcdCollector struct {
	status                                       etcdStatusFunc
	up, hasLeader, isLeader, changes, term, size *prometheus.Desc
	inUse                                        *prometheus.Desc
	mu                                           sync.Mutex
	leader                                       map[string]uint64 // last leader seen, by member name
	changed                                      map[string]uint64 // leader changes seen, by member name
}

func newEtcdCollector(status etcdStatusFunc) *etcdCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{metrics.LabelMember}, nil)
	}

	return &etcdCollector{
		status:    status,
		up:        desc(metrics.EtcdUp, "1 while the node's etcd member answers its status call without errors."),
		hasLeader: desc(metrics.EtcdHasLeader, "1 while the node's etcd member knows a leader."),
		isLeader:  desc(metrics.EtcdIsLeader, "1 while the node's etcd member is the leader."),
		changes:   desc(metrics.EtcdLeaderChanges, "Changes of leader the node's etcd member reported between two scrapes."),
		term:      desc(metrics.EtcdRaftTerm, "Raft term of the node's etcd member: one more at each election."),
		size:      desc(metrics.EtcdDBSize, "Size of the etcd member's database file, bytes."),
		inUse:     desc(metrics.EtcdDBSizeInUse, "Part of the etcd member's database file in use, bytes."),
		leader:    map[string]uint64{},
		changed:   map[string]uint64{},
	}
}

func (c *etcdCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.hasLeader, c.isLeader, c.changes, c.term, c.size, c.inUse} {
		ch <- d
	}
}

func (c *etcdCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok, err := c.status(context.Background())
	if !ok {
		return
	}

	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, st.Name)
	}

	// A member that does not answer has no known leader; its last
	// figures are not repeated as if they were current.
	answered := err == nil || st.ID != 0
	gauge(c.up, boolValue(err == nil))
	gauge(c.hasLeader, boolValue(answered && st.Leader != 0))
	gauge(c.isLeader, boolValue(answered && st.Leader != 0 && st.Leader == st.ID))
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(c.seen(st, answered)), st.Name)

	if answered {
		gauge(c.term, float64(st.RaftTerm))
		gauge(c.size, float64(st.DBSize))
		gauge(c.inUse, float64(st.DBSizeInUse))
	}
}

// seen records the leader of an answer and returns the member's count of
// leader changes; a leader lost and found again counts once.
func (c *etcdCollector) seen(st etcd.Status, answered bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()

	if answered && st.Leader != 0 {
		if last, ok := c.leader[st.Name]; ok && last != st.Leader {
			c.changed[st.Name]++
		}

		c.leader[st.Name] = st.Leader
	}

	return c.changed[st.Name]
}

// etcdStatus is the node's etcdStatusFunc.
func (n *Node) etcdStatus(ctx context.Context) (etcd.Status, bool, error) {
	e := n.etcd.member()
	if e == nil {
		return etcd.Status{}, false, nil
	}

	st, err := e.LocalStatus(ctx)

	return st, true, err
}

// timeCollector reports the time service of the current boot: whether
// the clock is synced, its offset from the last NTP reply, and when it
// was measured. Nothing before the first boot has one.
type timeCollector struct {
	status                func() (timesync.Status, bool)
	synced, offset, check *prometheus.Desc
}

func newTimeCollector(status func() (timesync.Status, bool)) timeCollector {
	return timeCollector{
		status: status,
		synced: prometheus.NewDesc(metrics.TimeSynced, "1 while the node's clock is within bounds of its NTP servers (or trusted as it is), else 0.", nil, nil),
		offset: prometheus.NewDesc(metrics.TimeOffset, "Offset of the node's clock from the NTP server of the last valid reply, seconds.", nil, nil),
		check:  prometheus.NewDesc(metrics.TimeLastCheck, "When the last round of NTP queries ended, unix seconds; 0 before the first.", nil, nil),
	}
}

func (c timeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.synced
	ch <- c.offset
	ch <- c.check
}

func (c timeCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.status()
	if !ok {
		return
	}

	var checked float64
	if !st.Checked.IsZero() {
		checked = float64(st.Checked.Unix())
	}

	ch <- prometheus.MustNewConstMetric(c.synced, prometheus.GaugeValue, boolValue(st.Synced))
	ch <- prometheus.MustNewConstMetric(c.offset, prometheus.GaugeValue, st.Offset.Seconds())
	ch <- prometheus.MustNewConstMetric(c.check, prometheus.GaugeValue, checked)
}

// timeStatus is the status of the current boot's time service.
func (n *Node) timeStatus() (timesync.Status, bool) {
	svc := n.config.timeService()
	if svc == nil {
		return timesync.Status{}, false
	}

	return svc.Status(), true
}
