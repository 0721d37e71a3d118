package revocation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/revocation"
)

func link(parent, child string, life time.Duration) revocation.Link {
	return revocation.Link{Parent: parent, Child: child, NotAfter: t0.Add(life)}
}

func newStore(t *testing.T, cli *clientv3.Client, clk clock.Clock) *revocation.Store {
	t.Helper()

	s, err := revocation.NewStore(revocation.StoreConfig{Client: cli, Clock: clk, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	return s
}

func record(t *testing.T, s *revocation.Store, links ...revocation.Link) {
	t.Helper()

	for _, l := range links {
		if err := s.Record(context.Background(), l); err != nil {
			t.Fatalf("Record %s -> %s: %v", l.Parent, l.Child, err)
		}
	}
}

func covered(rev revocation.Revocation) []string {
	var out []string
	for _, d := range rev.Descendants {
		out = append(out, d.Serial)
	}

	return out
}

// TestRevokeCoversDescendants: a revocation covers the certificate and
// every live certificate renewed from it however indirectly, through
// expired ones too, but not its ancestors or siblings; their renewals are
// refused from then on.
//
//	f0 ── a ── b ── c (expires first) ── d
//	      │    └─ e
//	      └─ ac
func TestRevokeCoversDescendants(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	s := newStore(t, etcdtest.Client(t, e), clk)
	ctx := context.Background()

	record(t, s, link("f0", "a", 10*time.Hour), link("a", "b", 10*time.Hour), link("b", "c", time.Hour),
		link("c", "d", 10*time.Hour), link("b", "e", 10*time.Hour), link("a", "ac", 10*time.Hour))

	clk.Advance(2 * time.Hour) // c expired; d, renewed from it before, did not

	rev, err := s.Revoke(ctx, entry("b", 10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	if got := covered(rev); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("the revocation of b covers %v, want [d e]", got)
	}

	for _, d := range rev.Descendants {
		if d.Existed || d.NotAfter != t0.Add(10*time.Hour) || d.RevokedBy != "O=os:admin, CN=admin" {
			t.Errorf("descendant recorded as %+v, want its own expiry and the revocation's author", d)
		}
	}

	list, err := s.List(ctx)
	if err != nil || fmt.Sprint(serials(list)) != "[b d e]" {
		t.Fatalf("List: %v, %v; want [b d e]", serials(list), err)
	}

	for _, parent := range []string{"b", "d", "e"} {
		if err := s.Record(ctx, link(parent, "f"+parent, 10*time.Hour)); !errors.Is(err, revocation.ErrRevoked) {
			t.Errorf("renewal of %s after the revocation: %v, want ErrRevoked", parent, err)
		}
	}

	for _, parent := range []string{"f0", "a", "ac"} {
		if err := s.Record(ctx, link(parent, "f"+parent, 10*time.Hour)); err != nil {
			t.Errorf("renewal of %s, not covered: %v", parent, err)
		}
	}

	t.Run("an expired certificate's revocation covers what was renewed from it", func(t *testing.T) {
		record(t, s, link("b0", "b1", 10*time.Hour))

		rev, err := s.Revoke(ctx, entry("b0", time.Hour)) // b0 expired an hour ago; b1, renewed from it, is live
		if err != nil || !slices.Equal(covered(rev), []string{"b1"}) || rev.Descendants[0].Existed {
			t.Fatalf("the revocation of the expired b0: %+v, %v; want b1 revoked", rev, err)
		}

		if _, err := s.Revoke(ctx, entry("ee", time.Hour)); !errors.Is(err, revocation.ErrBadEntry) {
			t.Fatalf("revocation of an expired certificate with nothing renewed from it: %v, want ErrBadEntry", err)
		}
	})

	t.Run("revoking again keeps the first records and covers what is new", func(t *testing.T) {
		again, err := s.Revoke(ctx, entry("a", 10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}

		if got := covered(again); !slices.Equal(got, []string{"ac", "b", "d", "e", "fa", "fac"}) {
			t.Fatalf("the revocation of a covers %v", got)
		}

		for _, d := range again.Descendants {
			if wantExisted := slices.Contains([]string{"b", "d", "e"}, d.Serial); d.Existed != wantExisted {
				t.Errorf("%s: existed %v, want %v", d.Serial, d.Existed, wantExisted)
			}
		}
	})
}

// TestRevokeWhileRenewing: a renewal recorded after the revocation read
// the lineage, before it wrote, is seen (the revocation reads again); a
// renewal whose parent is revoked after it read the lineage is refused.
func TestRevokeWhileRenewing(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	s := newStore(t, etcdtest.Client(t, e), clk)
	ctx := context.Background()

	record(t, s, link("a", "b", 10*time.Hour))

	t.Run("renewal between the revocation's read and write", func(t *testing.T) {
		cli := etcdtest.Client(t, e)
		cli.KV = &beforeTxn{KV: cli.KV, do: func() { record(t, s, link("b", "c", 10*time.Hour)) }}

		rev, err := newStore(t, cli, clk).Revoke(ctx, entry("a", 10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}

		if got := covered(rev); !slices.Equal(got, []string{"b", "c"}) {
			t.Fatalf("the revocation of a covers %v, want [b c]: c was renewed while it ran", got)
		}
	})

	t.Run("revocation between the renewal's read and write", func(t *testing.T) {
		cli := etcdtest.Client(t, e)
		cli.KV = &beforeTxn{KV: cli.KV, do: func() {
			if _, err := s.Revoke(ctx, entry("9a", 10*time.Hour)); err != nil {
				t.Error(err)
			}
		}}

		err := newStore(t, cli, clk).Record(ctx, link("9a", "9b", 10*time.Hour))
		if !errors.Is(err, revocation.ErrRevoked) {
			t.Fatalf("renewal of 9a revoked while it ran: %v, want ErrRevoked", err)
		}
	})
}

// beforeTxn runs do once, before the first transaction through it.
type beforeTxn struct {
	clientv3.KV

	once sync.Once
	do   func()
}

func (b *beforeTxn) Txn(ctx context.Context) clientv3.Txn {
	b.once.Do(b.do)

	return b.KV.Txn(ctx)
}

// TestRevokeRacesRenewals renews a chain as fast as it can while the first
// certificate is revoked: every renewal that succeeded is covered.
func TestRevokeRacesRenewals(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	renewer := newStore(t, etcdtest.Client(t, e), clk)
	revoker := newStore(t, etcdtest.Client(t, e), clk)
	ctx := context.Background()

	for round := range 5 {
		root := fmt.Sprintf("%x0", round+1)
		renewed := make(chan []string, 1)
		started := make(chan struct{})
		start := sync.OnceFunc(func() { close(started) })

		go func() {
			defer start() // a chain that stopped early

			var chain []string

			parent := root
			for i := range revocation.MaxLineage - 1 {
				child := fmt.Sprintf("%s%02x", root, i+1)
				if err := renewer.Record(ctx, link(parent, child, 10*time.Hour)); err != nil {
					if !errors.Is(err, revocation.ErrRevoked) && !errors.Is(err, revocation.ErrUnavailable) {
						t.Errorf("Record: %v", err)
					}

					break
				}

				chain, parent = append(chain, child), child
				if len(chain) == 2 {
					start()
				}
			}

			renewed <- chain
		}()

		<-started // the revocation races a chain already growing

		rev, err := revoker.Revoke(ctx, entry(root, 10*time.Hour))
		if err != nil {
			t.Fatal(err)
		}

		chain := <-renewed

		list, err := revoker.List(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for _, c := range chain {
			if !slices.Contains(serials(list), c) {
				t.Fatalf("round %d: %s renewed from %s (%d renewals, %d covered at the revocation) and not revoked",
					round, c, root, len(chain), len(rev.Descendants))
			}
		}

		t.Logf("round %d: %d renewals, %d covered by the revocation itself", round, len(chain), len(rev.Descendants))
	}
}

// TestLineageBounded: a family of renewals is bounded, so a revocation
// always fits in the list.
func TestLineageBounded(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	cli := etcdtest.Client(t, e)

	s, err := revocation.NewStore(revocation.StoreConfig{Client: cli, Clock: clk, MaxLineage: 3})
	if err != nil {
		t.Fatal(err)
	}

	record(t, s, link("a", "b", time.Hour), link("b", "c", 10*time.Hour))

	if err := s.Record(context.Background(), link("c", "d", 10*time.Hour)); !errors.Is(err, revocation.ErrLineageFull) {
		t.Fatalf("a fourth certificate in a family of three: %v, want ErrLineageFull", err)
	}

	clk.Advance(2 * time.Hour) // b expired

	record(t, s, link("c", "d", 10*time.Hour))
}

// TestLineagePruned: a link is dropped once its certificate has expired
// and nothing renewed from it is left; until then revoking an ancestor
// still reaches what was renewed from an expired certificate.
func TestLineagePruned(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	cli := etcdtest.Client(t, e)
	s := newStore(t, cli, clk)
	ctx := context.Background()

	record(t, s, link("a", "b", time.Hour), link("b", "c", 3*time.Hour), link("a", "d", time.Hour))

	clk.Advance(2 * time.Hour) // b and d expired, c not

	if n, err := s.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want a -> d alone dropped", n, err)
	}

	rev, err := s.Revoke(ctx, entry("a", 10*time.Hour))
	if err != nil || !slices.Equal(covered(rev), []string{"c"}) {
		t.Fatalf("the revocation of a covers %v (%v), want c, renewed from b", covered(rev), err)
	}

	clk.Advance(2 * time.Hour) // c expired

	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}

	resp, err := cli.Get(ctx, revocation.DefaultLineagePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d links left after every certificate expired (%v)", resp.Count, err)
	}
}
