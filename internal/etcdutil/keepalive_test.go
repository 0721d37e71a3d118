package etcdutil_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

// TestLeaderSharesKeepAliveStreams sends keep-alives one after the other,
// then the keep-alives of many leases at once, a lease that is gone and
// callers that give up among them: each caller gets the answer for its own
// lease; one stream at the leader carries the keep-alives sent in turn,
// and at most MaxKeepAliveStreams carry those sent at once (clientv3's
// KeepAliveOnce opens one per call); and a caller that gives up does not
// make Leader forget the leader.
func TestLeaderSharesKeepAliveStreams(t *testing.T) {
	e, _ := etcdtest.Start(t)
	url := endpoint(e)

	var atLeader, atCluster atomic.Int64

	dial := func(streams *atomic.Int64, ep string) (*clientv3.Client, error) {
		count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption,
		) (grpc.ClientStream, error) {
			if method == "/etcdserverpb.Lease/LeaseKeepAlive" {
				streams.Add(1)
			}

			return streamer(ctx, desc, cc, method, opts...)
		}

		return clientv3.New(clientv3.Config{
			Endpoints: []string{ep}, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(count)},
		})
	}

	cluster, err := dial(&atCluster, url)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = cluster.Close() })

	l := etcdutil.NewLeader(cluster, func(ep string) (*clientv3.Client, error) { return dial(&atLeader, ep) }, nil)
	t.Cleanup(func() { _ = l.Close() })

	ctx := context.Background()

	var leases []clientv3.LeaseID

	for i := range 20 {
		g, err := cluster.Grant(ctx, int64(30+i))
		if err != nil {
			t.Fatal(err)
		}

		leases = append(leases, g.ID)
	}

	_, _ = l.KeepAliveOnce(ctx, leases[0])
	waitFor(t, func() bool { return l.Endpoint() == url }, "Leader to find "+url)

	for i := range 30 {
		if err := renewOnce(ctx, l, leases[i%len(leases)], int64(30+i%len(leases)), 0); err != nil {
			t.Fatal(err)
		}
	}

	// The first keep-alive went through the cluster's client while
	// Leader looked for the leader; the others, at the leader, over one
	// stream.
	if lead, other := atLeader.Load(), atCluster.Load(); lead != 1 || other != 1 {
		t.Fatalf("keep-alive streams opened for keep-alives in turn: %d by the leader's client, %d by the cluster's; want 1 and 1", lead, other)
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)

	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()

		errs = append(errs, err)
	}

	for round := range 10 {
		for i, id := range leases {
			wg.Add(1)

			go func() {
				defer wg.Done()

				if err := renewOnce(ctx, l, id, int64(30+i), round*len(leases)+i); err != nil {
					fail(err)
				}
			}()
		}
	}

	wg.Wait()

	for _, err := range errs {
		t.Error(err)
	}

	if lead, other := atLeader.Load(), atCluster.Load(); lead < 1 || lead > etcdutil.MaxKeepAliveStreams || other != 1 {
		t.Fatalf("keep-alive streams opened for 200 keep-alives at once: %d by the leader's client, %d by the cluster's; want 1 to %d and 1",
			lead, other, etcdutil.MaxKeepAliveStreams)
	}

	t.Logf("200 keep-alives at once: %d streams at the leader", atLeader.Load())

	if got := l.Endpoint(); got != url {
		t.Fatalf("Leader believes %q leads, want %q", got, url)
	}
}

// renewOnce renews id, which has ttl, as the n-th caller: every seventh
// caller gives up before its answer, and every eleventh asks for a lease
// that is not there.
func renewOnce(ctx context.Context, l *etcdutil.Leader, id clientv3.LeaseID, ttl int64, n int) error {
	switch {
	case n%7 == 3:
		gone, cancel := context.WithCancel(ctx)
		cancel()

		if _, err := l.KeepAliveOnce(gone, id); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("a caller that gave up got %v, want context.Canceled", err)
		}
	case n%11 == 5:
		if _, err := l.KeepAliveOnce(ctx, id+1<<40); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("a lease that is not there: %v, want ErrLeaseNotFound", err)
		}
	default:
		resp, err := l.KeepAliveOnce(ctx, id)
		if err != nil || resp.ID != id || resp.TTL != ttl {
			return fmt.Errorf("lease %x: KeepAliveOnce = %+v, %v; want TTL %d", id, resp, err, ttl)
		}
	}

	return nil
}
