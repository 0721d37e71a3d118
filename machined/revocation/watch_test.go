package revocation_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/revocation"
	"github.com/aegis-os/aegis/machined/trustdclient"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// wireEntry is a wire revocation of serial valid for an hour.
func wireEntry(serial string) *revocations.Revocation {
	return &revocations.Revocation{Serial: serial, NotAfter: timestamppb.New(time.Now().Add(time.Hour).UTC().Truncate(time.Second))}
}

// startWatcher runs a watcher of the endpoints, with a node certificate of
// authority, on a fake clock that the test alone advances; it returns the
// endpoint the worker prefers too.
func startWatcher(t *testing.T, authority *ca.CA, endpoints ...string) (*revocation.List, *clock.Fake, string) {
	t.Helper()

	crt, key := trustdtest.ServerCertificate(t, authority, "127.0.1.9")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}

	cas, err := ca.NewAcceptedSet(time.Now(), authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	client, err := trustdclient.New(trustdclient.Config{
		Endpoints: endpoints, AcceptedCAs: cas.Pool,
		Certificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
	})
	if err != nil {
		t.Fatal(err)
	}

	list, err := revocation.OpenList(revocation.ListConfig{})
	if err != nil {
		t.Fatal(err)
	}

	clk := clock.NewFake(time.Now())

	w, err := revocation.NewWatcher(revocation.PollerConfig{Trustd: client, List: list, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		w.Run(ctx)
	}()

	t.Cleanup(func() {
		cancel()
		<-done
		_ = client.Close()
	})

	return list, clk, client.Preferred()
}

// waitList waits until list holds want (its serials) at revision.
func waitList(t *testing.T, list *revocation.List, want string, revision int64) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for {
		changed := list.Changed()

		got := fmt.Sprint(serials(list.Entries()))
		if got == want && list.Revision() == revision {
			return
		}

		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("list %s at revision %d, want %s at %d", got, list.Revision(), want, revision)
		}
	}
}

// TestWatchPushesRevocation: a revocation reaches a watching worker
// without a poll (its clock never moves, and no timer is pending), at
// the revision of the control plane's list.
func TestWatchPushesRevocation(t *testing.T) {
	feed := &trustd.RevocationFeed{}
	feed.Set(1, []*revocations.Revocation{wireEntry("ab")})

	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: feed, Clock: clock.NewFake(time.Now())})
	list, clk, _ := startWatcher(t, env.CA, env.Addr)

	waitList(t, list, "[ab]", 1)

	start := time.Now()

	feed.Set(2, []*revocations.Revocation{wireEntry("ab"), wireEntry("cd")})
	waitList(t, list, "[ab cd]", 2)

	t.Logf("revocation reached the watcher %v after the control plane had it", time.Since(start))

	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending on the worker's clock: it polled or waited, want it watching", n)
	}
}

// TestWatchResumesOnTheNextEndpoint: a control plane that stops ends its
// watches; the worker waits a jittered moment (at most WatchMoveSpread),
// so that the workers of that control plane do not all move in the same
// instant, then watches the next one from the revision it has, and gets
// at once what changed meanwhile.
func TestWatchResumesOnTheNextEndpoint(t *testing.T) {
	authority, err := ca.Generate(ca.Config{CommonName: "shared CA"})
	if err != nil {
		t.Fatal(err)
	}

	feedA, feedB := &trustd.RevocationFeed{}, &trustd.RevocationFeed{}
	feedA.Set(5, []*revocations.Revocation{wireEntry("ab")})
	feedB.Set(5, []*revocations.Revocation{wireEntry("ab")})

	a := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: feedA, CA: authority, Clock: clock.NewFake(time.Now())})
	b := trustdtest.Start(t, trustdtest.Options{GateOpen: true, Revocations: feedB, CA: authority, Clock: clock.NewFake(time.Now())})

	list, clk, preferred := startWatcher(t, authority, a.Addr, b.Addr)
	waitList(t, list, "[ab]", 5)

	// The worker watches the control plane it prefers (A here); the other
	// (B) has read a revocation that A, stopping, never passes on.
	if preferred == b.Addr {
		a, b, feedB = b, a, feedA
	}

	feedB.Set(6, []*revocations.Revocation{wireEntry("ab"), wireEntry("ef")})
	a.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("the worker did not wait before it moved: %v", err)
	}

	if got := fmt.Sprint(serials(list.Entries())); got != "[ab]" || list.Revision() != 5 {
		t.Fatalf("list %s at revision %d while the worker waits to move, want [ab] at 5", got, list.Revision())
	}

	clk.Advance(revocation.WatchMoveSpread)
	waitList(t, list, "[ab ef]", 6)

	feedB.Set(7, []*revocations.Revocation{wireEntry("ef")})
	waitList(t, list, "[ef]", 7)
}

// oldTrustd serves Serials only, as a control plane of the minor version
// before the watch.
type oldTrustd struct {
	revocations.UnimplementedNodeRevocationServiceServer

	calls chan struct{} // one per call
}

func (o *oldTrustd) Serials(context.Context, *revocations.SerialsRequest) (*revocations.SerialsResponse, error) {
	o.calls <- struct{}{}

	return &revocations.SerialsResponse{Revocations: []*revocations.Revocation{wireEntry("ab")}}, nil
}

// TestWatchFallsBackToPolling: a control plane that answers the watch
// Unimplemented is polled at PollInterval.
func TestWatchFallsBackToPolling(t *testing.T) {
	authority, err := ca.Generate(ca.Config{CommonName: "old CA"})
	if err != nil {
		t.Fatal(err)
	}

	kp := trustdtest.ServerKeyPair(t, authority, trustdtest.ListenIP)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		GetCertificate: kp.GetCertificate, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS13,
	})))
	old := &oldTrustd{calls: make(chan struct{}, 8)}
	revocations.RegisterNodeRevocationServiceServer(srv, old)

	lis, err := net.Listen("tcp", net.JoinHostPort(trustdtest.ListenIP, "0"))
	if err != nil {
		t.Fatal(err)
	}

	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	list, clk, _ := startWatcher(t, authority, lis.Addr().String())
	waitList(t, list, "[ab]", 0)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	<-old.calls // the first poll, which made the list

	for polls := 2; polls <= 3; polls++ {
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		clk.Advance(revocation.PollInterval)

		select {
		case <-old.calls:
		case <-ctx.Done():
			t.Fatalf("no poll %d after %v more", polls, revocation.PollInterval)
		}
	}
}
