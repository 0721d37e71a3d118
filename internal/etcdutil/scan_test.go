package etcdutil_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

// TestScan reads every key of a prefix in pages, in order, as one
// snapshot, and refuses a prefix of more keys than allowed.
func TestScan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)

	var want []string

	for i := range 10 {
		k := fmt.Sprintf("/p/%02d", i)
		want = append(want, k)

		if _, err := cli.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}

	// Outside the prefix, on either side.
	for _, k := range []string{"/o", "/q"} {
		if _, err := cli.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("whole, in order, as one snapshot", func(t *testing.T) {
		var got []string

		rev, err := etcdutil.Scan(ctx, cli, "/p/", 3, 10, func(kv *mvccpb.KeyValue) {
			if len(got) == 0 {
				// Written after the first page was read: not in this scan.
				if _, err := cli.Put(ctx, "/p/05a", "late"); err != nil {
					t.Error(err)
				}
			}

			got = append(got, string(kv.Key))
		})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Scan = %q, %v; want %q", got, err, want)
		}

		if rev == 0 {
			t.Fatal("no revision returned")
		}
	})

	t.Run("more keys than allowed", func(t *testing.T) {
		// 11 keys now, with the late one.
		_, err := etcdutil.Scan(ctx, cli, "/p/", 4, 10, func(*mvccpb.KeyValue) {})
		if !errors.Is(err, etcdutil.ErrTooMany) {
			t.Fatalf("Scan of 11 keys allowing 10: %v, want ErrTooMany", err)
		}
	})
}

// pagesKV records whether each read was serializable, and answers the
// serializable ones ErrFutureRev while behind is set, as a member that
// has not applied the revision asked for does.
type pagesKV struct {
	clientv3.KV
	behind       bool
	serializable []bool
}

func (p *pagesKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	s := clientv3.OpGet(key, opts...).IsSerializable()
	p.serializable = append(p.serializable, s)

	if s && p.behind {
		return nil, rpctypes.ErrGRPCFutureRev
	}

	return p.KV.Get(ctx, key, opts...)
}

// TestScanReadsLaterPagesSerializable: the first page is linearizable, the
// others serializable at its revision; a member behind that revision has
// the page read linearizable instead, and the scan is whole either way.
func TestScanReadsLaterPagesSerializable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)

	for i := range 7 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/p/%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name   string
		behind bool
		want   []bool
	}{
		{"later pages serializable", false, []bool{false, true, true}},
		{"a member behind the revision", true, []bool{false, true, false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := &pagesKV{KV: cli.KV, behind: tc.behind}
			n := 0

			if _, err := etcdutil.Scan(ctx, kv, "/p/", 3, 10, func(*mvccpb.KeyValue) { n++ }); err != nil || n != 7 {
				t.Fatalf("Scan = %d keys, %v; want 7", n, err)
			}

			if !slices.Equal(kv.serializable, tc.want) {
				t.Fatalf("reads serializable %v, want %v", kv.serializable, tc.want)
			}
		})
	}
}
