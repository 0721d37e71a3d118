package membership

import (
	"fmt"
	"slices"
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
func following(tb testing.TB, clk clock.Clock, n int) (*follower, *[][]Change) {
	tb.Helper()

	var lists [][]Change

	f := &follower{
		s:       &Store{clock: clk, max: MaxMembers},
		publish: func(l []Change) { lists = append(lists, l) },
		shown:   map[string]*Member{}, dirty: map[string]struct{}{},
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

// changed is what one publish said, as hostname or "-address" (left),
// sorted.
func changed(cs []Change) []string {
	var out []string

	for _, c := range cs {
		if c.Member == nil {
			out = append(out, "-"+c.Address)
		} else {
			out = append(out, c.Member.GetHostname())
		}
	}

	slices.Sort(out)

	return out
}

// TestFollowerPublishesWhatReadersSee: a heartbeat that moves only
// last_seen publishes nothing and leaves the next age-out where it was
// unless it was the first to age out; a change a reader sees, a new
// member, one that leaves, and one that ages out by its stamp publish
// that member alone.
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

	if len(*lists) != 2 || !slices.Equal(changed((*lists)[1]), []string{"worker-00002"}) {
		t.Fatalf("a new version published %d times in all, want 2, the last only worker 2: %v", len(*lists), *lists)
	}

	// A new member, and one that leaves.
	f.apply(put(t, member(3, clk.Now())))
	f.apply(&clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key(member(0, start)))}})
	f.emit()

	if got := changed((*lists)[len(*lists)-1]); len(*lists) != 3 || !slices.Equal(got, []string{"-10.0.0.0", "worker-00003"}) {
		t.Fatalf("after a join and a leave: %d publishes, the last %q", len(*lists), got)
	}

	// Nobody is seen again: every member ages out by its stamp, as emit
	// finds once the age-out's timer fired.
	clk.Advance(due())

	if d, ok := f.untilAgeOut(); !ok || d != 0 {
		t.Fatalf("at the age-out, untilAgeOut = %s, %v; want 0, true", d, ok)
	}

	f.emit()

	if got := changed((*lists)[len(*lists)-1]); !slices.Equal(got, []string{"-10.0.0.1", "-10.0.0.2", "-10.0.0.3"}) {
		t.Fatalf("after the age-out, published %q, want every member gone", got)
	}

	if _, ok := f.untilAgeOut(); ok {
		t.Fatal("an age-out is still due with no member live")
	}
}

// TestFollowerReadAgain: after the list is read again (a watch that
// failed), publish is given only what differs from what it had, the
// members gone meanwhile included.
func TestFollowerReadAgain(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	f, lists := following(t, clk, 3)

	f.reset()
	f.apply(put(t, member(0, clk.Now())))

	m := member(1, clk.Now())
	m.Version = "v1.1.0"
	f.apply(put(t, m))
	f.emit()

	if got := changed((*lists)[len(*lists)-1]); len(*lists) != 2 || !slices.Equal(got, []string{"-10.0.0.2", "worker-00001"}) {
		t.Fatalf("after a read again: %d publishes, the last %q", len(*lists), got)
	}

	f.reset()
	f.apply(put(t, member(0, clk.Now())))
	f.apply(put(t, m))
	f.emit()

	if len(*lists) != 2 {
		t.Fatalf("a read again that found the same members published %v", (*lists)[2:])
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
