package resources

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/node"
)

func name(host, addr string) *node.MemberName {
	return &node.MemberName{Hostname: host, Address: addr, Role: "worker"}
}

// summary is one message as "full" or "", then "+host@addr" for each set
// and "-addr" for each removed, sorted.
func summary(c *node.MemberChanges) string {
	var parts []string
	for _, n := range c.GetSet() {
		parts = append(parts, "+"+n.GetHostname()+"@"+n.GetAddress())
	}

	for _, a := range c.GetRemoved() {
		parts = append(parts, "-"+a)
	}

	slices.Sort(parts)

	return fmt.Sprint(c.GetFull(), parts)
}

// TestWatchMembers: apid's socket sends the whole list, then only the
// members that came, changed or left; trustd's socket refuses.
func TestWatchMembers(t *testing.T) {
	members := NewMembers()
	members.Apply([]*node.MemberName{name("cp-1", "10.0.0.1"), name("w-1", "10.0.0.2")}, nil)

	conn, err := Dial(listen(t, NewStore(), members))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan string, 16)

	go WatchMembers(ctx, conn, slog.New(slog.DiscardHandler), func(c *node.MemberChanges) error {
		got <- summary(c)

		return nil
	})

	expect := func(want string) {
		t.Helper()

		select {
		case s := <-got:
			if s != want {
				t.Fatalf("sent %s, want %s", s, want)
			}
		case <-ctx.Done():
			t.Fatalf("nothing sent, want %s", want)
		}
	}

	expect("true [+cp-1@10.0.0.1 +w-1@10.0.0.2]")

	members.Apply([]*node.MemberName{name("w-2", "10.0.0.3")}, []string{"10.0.0.2", "10.0.0.9"})
	expect("false [+w-2@10.0.0.3 -10.0.0.2]")

	// Nothing changed: nothing is sent; the next change is.
	members.Apply(nil, []string{"10.0.0.9"})
	members.Apply([]*node.MemberName{name("w-3", "10.0.0.3")}, nil)
	expect("false [+w-3@10.0.0.3]")

	trustd, err := Dial(listen(t, NewStore(), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer trustd.Close()

	stream, err := node.NewNodeServiceClient(trustd).WatchMembers(ctx, &node.WatchRequest{})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("WatchMembers on a socket without members: %v, want PermissionDenied", err)
	}
}

// TestMembersSince: a watcher behind is sent each member changed once, as
// it is now; one further behind than the log reaches is sent the whole
// list.
func TestMembersSince(t *testing.T) {
	m := NewMembers()
	m.Apply([]*node.MemberName{name("a", "10.0.0.1")}, nil)

	_, seq, _ := m.snapshot()

	m.Apply([]*node.MemberName{name("b", "10.0.0.2")}, nil)
	m.Apply([]*node.MemberName{name("b2", "10.0.0.2")}, []string{"10.0.0.1"})

	c, next, _ := m.since(seq)
	if got := summary(c); got != "false [+b2@10.0.0.2 -10.0.0.1]" || next != seq+3 {
		t.Fatalf("since(%d) = %s up to %d", seq, got, next)
	}

	if c, _, _ := m.since(next); c != nil {
		t.Fatalf("since the last change: %s, want nothing", summary(c))
	}

	for i := range 2 * MembersLog {
		m.Apply([]*node.MemberName{name(fmt.Sprint("w-", i), "10.0.1.1")}, nil)
	}

	c, _, _ = m.since(next)
	if want := fmt.Sprintf("true [+b2@10.0.0.2 +w-%d@10.0.1.1]", 2*MembersLog-1); summary(c) != want {
		t.Fatalf("a watcher behind the log was sent %s, want the whole list", summary(c))
	}

	if l := len(m.log); l > 2*MembersLog {
		t.Fatalf("the log holds %d changes, more than %d", l, 2*MembersLog)
	}
}
