package etcdutil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

// TestPrune deletes the expired keys under the prefix, leaves the others
// and those outside it, and leaves a key written between the read and the
// deletion for the next prune.
func TestPrune(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)

	for k, v := range map[string]string{
		"/p/expired-1": "expired", "/p/expired-2": "expired", "/p/live": "live",
		"/p/rewritten": "expired", "/other/expired": "expired",
	} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}

	var judged []string

	n, err := etcdutil.Prune(ctx, cli, "/p/", func(value []byte) bool {
		judged = append(judged, string(value))

		if len(judged) == 4 { // "/p/rewritten", the last key in order
			if _, err := cli.Put(ctx, "/p/rewritten", "expired"); err != nil {
				t.Fatal(err)
			}
		}

		return string(value) == "expired"
	})
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2 deleted", n, err)
	}

	if len(judged) != 4 {
		t.Fatalf("judged %d values, want the 4 under the prefix", len(judged))
	}

	if got := keys(ctx, t, cli); got != "/other/expired /p/live /p/rewritten" {
		t.Fatalf("left %s, want /other/expired /p/live /p/rewritten", got)
	}

	n, err = etcdutil.Prune(ctx, cli, "/p/", func(value []byte) bool { return string(value) == "expired" })
	if err != nil || n != 1 {
		t.Fatalf("second Prune = %d, %v; want the rewritten key deleted", n, err)
	}

	stop()

	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()

	if _, err := etcdutil.Prune(short, cli, "/p/", func([]byte) bool { return true }); err == nil {
		t.Fatal("Prune with etcd stopped returned no error")
	}
}

func keys(ctx context.Context, t *testing.T, cli *clientv3.Client) string {
	t.Helper()

	resp, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}

	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}

	return strings.Join(out, " ")
}
