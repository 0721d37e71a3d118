package revocation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/machined/revocation"
)

// TestFollowIgnoresProgress: a notice of the watch's progress, which etcd
// sends to every watch of a stream when one of its readers asks, is not a
// change: Follow reads the list again for the revocation alone.
func TestFollowIgnoresProgress(t *testing.T) {
	e, _ := etcdtest.Start(t)
	clk := clock.NewFake(t0)
	ctx := context.Background()

	writer, err := revocation.NewStore(revocation.StoreConfig{Client: etcdtest.Client(t, e), Max: 8, Clock: clk, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	cli := etcdtest.Client(t, e)
	kv := etcdtest.Count(cli)

	follower, err := revocation.NewStore(revocation.StoreConfig{Client: cli, Max: 8, Clock: clk, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lists := make(chan []revocation.Entry, 10)
	go follower.Follow(fctx, func(e []revocation.Entry, _ int64) { lists <- e })

	if got := <-lists; len(got) != 0 {
		t.Fatalf("first list %v, want none", serials(got))
	}

	// A revocation that reaches Follow shows its watch runs.
	revoke := func(serial, want string) {
		t.Helper()

		if _, err := writer.Revoke(ctx, entry(serial, time.Hour)); err != nil {
			t.Fatal(err)
		}

		select {
		case got := <-lists:
			if fmt.Sprint(serials(got)) != want {
				t.Fatalf("after revoking %s: %v, want %s (a notice of progress taken for a change)", serial, serials(got), want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the revocation of %s did not reach Follow", serial)
		}
	}

	revoke("a1", "[a1]")

	before := kv.Gets.Load()

	// The watch's stream is the one of its context's metadata.
	if err := cli.RequestProgress(clientv3.WithRequireLeader(fctx)); err != nil {
		t.Fatal(err)
	}

	revoke("a2", "[a1 a2]")

	if n := kv.Gets.Load() - before; n != 1 {
		t.Fatalf("Follow read the list %d times for one revocation, want once", n)
	}
}
