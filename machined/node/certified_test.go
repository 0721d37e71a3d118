package node

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// TestCertifiedRecord serves Certified and Remove from a real etcd as a
// control plane wires them: etcd's member and the bound workers listed;
// a live worker and the control plane refused; an aged-out worker removed,
// its name free for another node; etcd stopped Unavailable; a worker
// without etcd refused.
func TestCertifiedRecord(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	clk := clock.NewFake(time.Now())
	ctx := context.Background()

	rec := certifiedRecord{client: func() (*clientv3.Client, error) { return cli, nil }, clock: clk}
	srv := membershippkg.NewServer(membershippkg.ServerConfig{
		Certified: rec.Certified, RemoveEntries: rec.RemoveEntries, Release: rec.Release, Clock: clk,
	})

	names, err := namestore.New(namestore.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	members, err := membershippkg.New(membershippkg.Config{Client: cli, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	until := clk.Now().Add(24 * time.Hour)
	for _, w := range []struct{ name, addr string }{{"worker-1", "10.0.0.5"}, {"worker-2", "10.0.0.6"}} {
		a := netip.MustParseAddr(w.addr)
		if err := names.Bind(ctx, trustd.Binding{Name: w.name, Source: a, Addresses: []netip.Addr{a}, NotAfter: until}); err != nil {
			t.Fatal(err)
		}
	}

	entry := &membershippkg.Member{Hostname: "worker-1", Addresses: []string{"10.0.0.5"}, Interval: durationpb.New(time.Second)}
	if err := members.Put(ctx, entry, membershippkg.RoleWorker); err != nil {
		t.Fatal(err)
	}

	certified := func() []string {
		t.Helper()

		resp, err := srv.Certified(ctx, &membership.CertifiedRequest{})
		if err != nil {
			t.Fatal(err)
		}

		var out []string
		for _, n := range resp.GetMessages()[0].GetNodes() {
			out = append(out, n.GetHostname()+" "+n.GetRole()+" "+strings.Join(n.GetAddresses(), ",")+" "+
				map[bool]string{true: "until " + n.GetNotAfter().AsTime().Format(time.RFC3339), false: "-"}[n.GetNotAfter() != nil])
		}

		return out
	}

	cp := e.Config().Name + " controlplane 127.0.0.1 -"
	at := "until " + until.UTC().Format(time.RFC3339)

	if got, want := certified(), []string{cp, "worker-1 worker 10.0.0.5 " + at, "worker-2 worker 10.0.0.6 " + at}; !slices.Equal(got, want) {
		t.Fatalf("Certified = %q, want %q", got, want)
	}

	for _, refused := range []struct{ node, text string }{
		{"worker-1", "worker-1 (10.0.0.5) still sends heartbeats (its entry was written 0s ago; it ages out 3s after the last one); stop or reset it first"},
		{e.Config().Name, "is a control plane; it leaves the cluster through etcd's member removal"},
	} {
		_, err := srv.Remove(ctx, &membership.RemoveRequest{Node: refused.node})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), refused.text) {
			t.Fatalf("Remove(%s): %v, want FailedPrecondition with %q", refused.node, err, refused.text)
		}
	}

	clk.Advance(membershippkg.StaleAfter(time.Second) + time.Second)

	for _, node := range []string{"worker-1", "10.0.0.6"} {
		resp, err := srv.Remove(ctx, &membership.RemoveRequest{Node: node})
		if err != nil || !resp.GetMessages()[0].GetNameReleased() {
			t.Fatalf("Remove(%s) = %v, %v", node, resp, err)
		}
	}

	if got := certified(); !slices.Equal(got, []string{cp}) {
		t.Fatalf("Certified after the removals = %q, want the control plane alone", got)
	}

	if err := names.Check(ctx, "worker-1", netip.MustParseAddr("10.0.0.9")); err != nil {
		t.Fatalf("worker-1 for a new node: %v, want free", err)
	}

	stop()

	if _, err := srv.Certified(ctx, &membership.CertifiedRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Certified with etcd stopped: %v, want Unavailable", err)
	}

	if _, err := srv.Remove(ctx, &membership.RemoveRequest{Node: "worker-2"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Remove with etcd stopped: %v, want Unavailable", err)
	}

	worker := certifiedRecord{client: func() (*clientv3.Client, error) { return nil, membershippkg.ErrNoEtcd }, clock: clk}
	noEtcd := membershippkg.NewServer(membershippkg.ServerConfig{Certified: worker.Certified})

	if _, err := noEtcd.Certified(ctx, &membership.CertifiedRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Certified without etcd: %v, want FailedPrecondition", err)
	}
}
