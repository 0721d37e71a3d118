package etcdutil_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

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
