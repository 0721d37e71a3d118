package namestore_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// TestHolders runs Holders on a real etcd: etcd's member with the
// addresses of its URLs, then each name bound until a time to come with
// its addresses and end; a binding past its end, or released, is no
// holder; without quorum, an error rather than a short list.
func TestHolders(t *testing.T) {
	e, stop := etcdtest.Start(t)
	clk := clock.NewFake(time.Now())
	ctx := context.Background()

	s, err := namestore.New(namestore.Config{Client: etcdtest.Client(t, e), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	long, short := clk.Now().Add(24*time.Hour), clk.Now().Add(time.Hour)
	for _, b := range []struct {
		name, source string
		notAfter     time.Time
	}{
		{"worker-b", "10.0.0.6", long}, {"worker-a", "10.0.0.5", long}, {"worker-c", "10.0.0.7", short}, {"worker-d", "10.0.0.8", long},
	} {
		if err := s.Bind(ctx, binding(b.name, b.source, b.notAfter)); err != nil {
			t.Fatal(err)
		}
	}

	if err := s.Release(ctx, "worker-d", []netip.Addr{addr("10.0.0.8")}); err != nil {
		t.Fatal(err)
	}

	clk.Advance(2 * time.Hour) // worker-c's certificate has expired

	got, err := s.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}

	want := []namestore.Holder{
		{Name: e.Config().Name, Addresses: []netip.Addr{addr("127.0.0.1")}, ControlPlane: true},
		{Name: "worker-a", Addresses: []netip.Addr{addr("10.0.0.5")}, NotAfter: long},
		{Name: "worker-b", Addresses: []netip.Addr{addr("10.0.0.6")}, NotAfter: long},
	}

	if len(got) != len(want) {
		t.Fatalf("Holders = %+v, want %+v", got, want)
	}

	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.ControlPlane != w.ControlPlane || !g.NotAfter.Equal(w.NotAfter) || len(g.Addresses) != len(w.Addresses) || g.Addresses[0] != w.Addresses[0] {
			t.Fatalf("holder %d = %+v, want %+v", i, g, w)
		}
	}

	stop()

	if got, err := s.Holders(ctx); err == nil {
		t.Fatalf("Holders without etcd = %+v, want an error", got)
	}
}
