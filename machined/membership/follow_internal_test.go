package membership

import (
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/internal/clock"
)

// following is a follower of n members, loaded, with what it published.
func following(tb testing.TB, clk clock.Clock, n int) (*follower, *[][]*Member) {
	tb.Helper()

	var lists [][]*Member

	f := &follower{
		s:       &Store{clock: clk, max: MaxMembers},
		publish: func(l []*Member) { lists = append(lists, l) },
	}

	f.reset()

	for i := range n {
		f.apply(put(tb, member(i, clk.Now())))
	}

	f.emit()

	return f, &lists
}

func member(i int, seen time.Time) *Member {
	return &Member{
		Hostname: fmt.Sprintf("worker-%05d", i), Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
		Role: RoleWorker, Version: "v1.0.0", Interval: durationpb.New(10 * time.Second), LastSeen: timestamppb.New(seen),
	}
}

func put(tb testing.TB, m *Member) *clientv3.Event {
	tb.Helper()

	data, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}

	return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(key(m)), Value: data}}
}

// TestFollowerPublishesWhatReadersSee: a heartbeat that moves only
// last_seen publishes nothing and leaves the next age-out where it was
// unless it was the first to age out; a change a reader sees, a new
// member, one that leaves, and one that ages out by its stamp publish.
func TestFollowerPublishesWhatReadersSee(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	f, lists := following(t, clk, 3)

	if len(*lists) != 1 || len((*lists)[0]) != 3 {
		t.Fatalf("published %d lists after the load, want one of 3", len(*lists))
	}

	due := func() time.Duration { d, _ := f.untilAgeOut(); return d }
	first := due()

	// worker 1 is seen again: nothing a reader sees changed.
	clk.Advance(time.Second)
	f.apply(put(t, member(1, clk.Now())))
	f.emit()

	if len(*lists) != 1 {
		t.Fatalf("a heartbeat that moved only last_seen published a list")
	}

	if got := due(); got != first-time.Second {
		t.Fatalf("the next age-out moved to %s from %s, want it unchanged", got, first-time.Second)
	}

	// Workers 0 and 2 are seen again too: the first age-out is now worker 1's.
	f.apply(put(t, member(0, clk.Now())))
	f.apply(put(t, member(2, clk.Now())))
	f.emit()

	if got := due(); got != StaleAfter(10*time.Second)+time.Nanosecond {
		t.Fatalf("next age-out in %s, want %s", got, StaleAfter(10*time.Second))
	}

	// A new version is a change a reader sees.
	m := member(2, clk.Now())
	m.Version = "v1.1.0"
	f.apply(put(t, m))
	f.emit()

	if len(*lists) != 2 {
		t.Fatalf("a new version published %d lists in all, want 2", len(*lists))
	}

	// A new member, and one that leaves.
	f.apply(put(t, member(3, clk.Now())))
	f.apply(&clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key(member(0, start)))}})
	f.emit()

	if got := (*lists)[len(*lists)-1]; len(*lists) != 3 || len(got) != 3 || got[0].GetHostname() != "worker-00001" {
		t.Fatalf("after a join and a leave: %d lists, the last %v", len(*lists), got)
	}

	// Nobody is seen again: every member ages out by its stamp.
	clk.Advance(due())
	f.changed = true // as next does when the age-out's timer fires
	f.emit()

	if got := (*lists)[len(*lists)-1]; len(got) != 0 {
		t.Fatalf("after the age-out, %d members published, want none", len(got))
	}
}

// BenchmarkFollowerHeartbeat is the follower's cost of one heartbeat that
// writes its entry (last_seen moved) in a list of 5,000 members.
func BenchmarkFollowerHeartbeat(b *testing.B) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	f, _ := following(b, clk, 5000)

	evs := make([]*clientv3.Event, 5000)
	for i := range evs {
		evs[i] = put(b, member(i, clk.Now().Add(time.Second)))
	}

	b.ResetTimer()

	for i := range b.N {
		f.apply(evs[i%len(evs)])
		f.emit()
		f.untilAgeOut()
	}
}
