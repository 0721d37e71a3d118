package trustd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// watchEnv is a trustd serving feed, and a node's connection to it.
func watchEnv(t *testing.T, feed *trustd.RevocationFeed, withCert bool) revocations.NodeRevocationServiceClient {
	t.Helper()

	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: feed, Clock: clock.NewFake(time.Now())})
	cfg := &tls.Config{RootCAs: env.CAs.Pool(), ServerName: trustdtest.ListenIP, MinVersion: tls.VersionTLS13}

	if withCert {
		crt, key := trustdtest.ServerCertificate(t, env.CA, "127.0.1.9")

		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}

		cfg.Certificates = []tls.Certificate{pair}
	}

	conn, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	return revocations.NewNodeRevocationServiceClient(conn)
}

// list is n wire revocations, valid for an hour.
func list(n int) []*revocations.Revocation {
	notAfter := timestamppb.New(time.Now().Add(time.Hour))
	out := make([]*revocations.Revocation, n)

	for i := range out {
		out[i] = &revocations.Revocation{Serial: fmt.Sprintf("%040x", i+1), NotAfter: notAfter}
	}

	return out
}

// watch opens a watch from revision and waits until trustd accepted it.
func watch(ctx context.Context, t *testing.T, c revocations.NodeRevocationServiceClient, revision int64) grpc.ServerStreamingClient[revocations.WatchResponse] {
	t.Helper()

	st, err := c.Watch(ctx, &revocations.WatchRequest{Revision: revision})
	if err != nil {
		t.Fatal(err)
	}

	if md, _ := st.Header(); md == nil {
		_, err := st.Recv()
		t.Fatalf("watch from revision %d refused: %v", revision, err)
	}

	return st
}

func recvRevision(t *testing.T, st grpc.ServerStreamingClient[revocations.WatchResponse]) (int64, int) {
	t.Helper()

	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}

	return resp.GetRevision(), len(resp.GetRevocations())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	return ctx
}

// TestRevocationWatchFromRevision: a node without a revision, or with an
// older one, gets the list at once; a current one gets nothing until the
// list changes, and then the new list.
func TestRevocationWatchFromRevision(t *testing.T) {
	ctx := testCtx(t)
	feed := &trustd.RevocationFeed{}
	feed.Set(3, list(2))
	c := watchEnv(t, feed, true)

	for _, from := range []int64{0, 2} {
		if rev, n := recvRevision(t, watch(ctx, t, c, from)); rev != 3 || n != 2 {
			t.Fatalf("from revision %d: got %d entries at %d, want 2 at 3", from, n, rev)
		}
	}

	current := watch(ctx, t, c, 3)
	feed.Set(4, list(3))

	// Had trustd sent revision 3 to the current watcher, it would come first.
	if rev, n := recvRevision(t, current); rev != 4 || n != 3 {
		t.Fatalf("current watcher got %d entries at %d first, want 3 at 4", n, rev)
	}
}

// TestRevocationWatchWithoutRevision: a control plane that has not read
// etcd yet (revision zero) sends its list at every change.
func TestRevocationWatchWithoutRevision(t *testing.T) {
	ctx := testCtx(t)
	feed := &trustd.RevocationFeed{}
	c := watchEnv(t, feed, true)

	st := watch(ctx, t, c, 0)
	if rev, n := recvRevision(t, st); rev != 0 || n != 0 {
		t.Fatalf("first: %d entries at %d, want 0 at 0", n, rev)
	}

	feed.Set(0, list(1))

	if rev, n := recvRevision(t, st); rev != 0 || n != 1 {
		t.Fatalf("after a change: %d entries at %d, want 1 at 0", n, rev)
	}
}

// TestRevocationWatchRefusesNonNodes: without a node certificate the
// watch is refused, as Serials is.
func TestRevocationWatchRefusesNonNodes(t *testing.T) {
	c := watchEnv(t, &trustd.RevocationFeed{}, false)

	st, err := c.Watch(testCtx(t), &revocations.WatchRequest{})
	if err == nil {
		_, err = st.Recv()
	}

	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("watch without a certificate: %v, want Unauthenticated", err)
	}
}

// TestRevocationWatchBoundPerSource: one source holds at most
// MaxRevocationWatchersPerSource watches; one more is ResourceExhausted,
// and gets its place once a watch ends.
func TestRevocationWatchBoundPerSource(t *testing.T) {
	ctx := testCtx(t)
	feed := &trustd.RevocationFeed{}
	feed.Set(1, list(1))
	c := watchEnv(t, feed, true)

	cancels := make([]context.CancelFunc, trustd.MaxRevocationWatchersPerSource)
	for i := range cancels {
		var wctx context.Context

		wctx, cancels[i] = context.WithCancel(ctx)
		watch(wctx, t, c, 1)
	}

	st, err := c.Watch(ctx, &revocations.WatchRequest{Revision: 1})
	if err == nil {
		_, err = st.Recv()
	}

	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("watch %d from one source: %v, want ResourceExhausted", trustd.MaxRevocationWatchersPerSource+1, err)
	}

	cancels[0]()

	// The place is given back when trustd sees the end: retry until then.
	for {
		st, err := c.Watch(ctx, &revocations.WatchRequest{Revision: 0})
		if err != nil {
			t.Fatal(err)
		}

		if _, err = st.Recv(); err == nil {
			return
		}

		if status.Code(err) != codes.ResourceExhausted || ctx.Err() != nil {
			t.Fatalf("watch after one ended: %v", err)
		}
	}
}

// TestRevocationWatchSlowWatcher: a watcher that does not read while the
// list changes many times gets the latest list once it reads, not a
// queue of the lists in between.
func TestRevocationWatchSlowWatcher(t *testing.T) {
	ctx := testCtx(t)
	feed := &trustd.RevocationFeed{}
	big := list(4096) // far past a stream's flow-control window
	feed.Set(1, big)
	c := watchEnv(t, feed, true)

	st := watch(ctx, t, c, 0)

	const last = 20
	for rev := int64(2); rev <= last; rev++ {
		feed.Set(rev, big)
	}

	var got []int64

	for len(got) == 0 || got[len(got)-1] != last {
		rev, _ := recvRevision(t, st)
		if len(got) > 0 && rev <= got[len(got)-1] {
			t.Fatalf("revisions %v then %d: not increasing", got, rev)
		}

		got = append(got, rev)
	}

	if len(got) > 3 {
		t.Fatalf("the slow watcher got revisions %v, want the first, at most one in between, and %d", got, last)
	}

	t.Logf("a watcher reading only after %d changes got revisions %v", last-1, got)
}
