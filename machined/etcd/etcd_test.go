package etcd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

func newTest(t *testing.T, endpoints ...string) *Etcd {
	t.Helper()

	e, err := New(Config{
		Name: "cp-1", Address: "127.0.0.1", Endpoints: endpoints, Dir: t.TempDir(), Binary: "/nonexistent/etcd",
		CA: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), ClusterToken: "test",
	})
	if err != nil {
		t.Fatal(err)
	}

	return e
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	good := Config{Name: "cp", Address: "127.0.0.1", Dir: "/d", Binary: "/b", CA: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)}

	for name, edit := range map[string]func(*Config){
		"no name":           func(c *Config) { c.Name = "" },
		"no CA":             func(c *Config) { c.CA = nil },
		"address not an IP": func(c *Config) { c.Address = "cp.example" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			edit(&cfg)

			if _, err := New(cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestPeerEndpoints(t *testing.T) {
	e := newTest(t, "127.0.0.1", "127.0.0.2:50001", "127.0.0.2", "[::1]:50001", "cp-3.example")

	want := []string{"https://127.0.0.2:2379", "https://[::1]:2379", "https://cp-3.example:2379"}
	if got := e.peerEndpoints(); !slices.Equal(got, want) {
		t.Fatalf("peer endpoints = %q, want %q (self left out, ports replaced, no duplicates)", got, want)
	}
}

func TestInitialCluster(t *testing.T) {
	tests := []struct {
		name    string
		members []member
		want    string
	}{
		{
			name:    "self not started yet",
			members: []member{{id: 1, name: "cp-1", peerURLs: []string{"https://a:2380"}}, {id: 2, peerURLs: []string{"https://b:2380"}}},
			want:    "cp-1=https://a:2380,cp-2=https://b:2380",
		},
		{
			name: "another learner not started yet",
			members: []member{
				{id: 1, name: "cp-1", peerURLs: []string{"https://a:2380"}},
				{id: 0xab, peerURLs: []string{"https://c:2380"}},
				{id: 2, peerURLs: []string{"https://b:2380"}},
			},
			want: "cp-1=https://a:2380,member-ab=https://c:2380,cp-2=https://b:2380",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := initialCluster(tt.members, 2, "cp-2"); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	e := newTest(t)

	for _, tt := range []struct {
		plan    startPlan
		initial bool
	}{
		{startPlan{state: fromData}, false},
		{startPlan{state: newCluster, initial: "cp-1=https://127.0.0.1:2380"}, true},
		{startPlan{state: existingCluster, initial: "a=https://x:2380,cp-1=https://127.0.0.1:2380"}, true},
	} {
		args := e.args(tt.plan)

		if got := slices.Contains(args, "--initial-cluster"); got != tt.initial {
			t.Errorf("%s: --initial-cluster present = %v, want %v", tt.plan.state, got, tt.initial)
		}

		for _, flag := range []string{"--client-cert-auth", "--peer-client-cert-auth"} {
			if !slices.Contains(args, flag) {
				t.Errorf("%s: %s missing: mTLS only", tt.plan.state, flag)
			}
		}

		if i := slices.Index(args, "--peer-cert-allowed-hostname"); i < 0 || args[i+1] != PeerName {
			t.Errorf("%s: the peer port admits more than peer certificates: %q", tt.plan.state, args)
		}

		if i := slices.Index(args, "--log-format"); i < 0 || args[i+1] != "json" {
			t.Errorf("%s: etcd's logs are not JSON by default: %q", tt.plan.state, args)
		}

		// The client port serves gRPC alone; HTTP goes to an mTLS socket
		// in the member's run folder.
		if i := slices.Index(args, "--listen-client-http-urls"); i < 0 || args[i+1] != "unixs://"+filepath.Join(e.cfg.Dir, "run", "http.sock") {
			t.Errorf("%s: the client port serves HTTP next to gRPC: %q", tt.plan.state, args)
		}
	}

	e.cfg.TextLogs = true
	if i := slices.Index(e.args(startPlan{state: fromData}), "--log-format"); i < 0 || e.args(startPlan{state: fromData})[i+1] != "console" {
		t.Errorf("TextLogs: %q", e.args(startPlan{state: fromData}))
	}
}

// TestOnlyPeerCertificateNamesPeer issues the member's certificates, a
// certSAN naming PeerName included: only the peer certificate names it,
// what the peer port admits.
func TestOnlyPeerCertificateNamesPeer(t *testing.T) {
	e, err := New(Config{
		Name: "cp-1", Address: "127.0.0.1", Dir: t.TempDir(), Binary: "/nonexistent/etcd", Hosts: []string{"127.0.0.1", "cp-1", PeerName},
		CA: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), ClusterToken: "test", Clock: clock.NewFake(testutil.Epoch),
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := os.MkdirAll(e.pkiDir(), 0o700); err != nil {
		t.Fatal(err)
	}

	if _, err := e.IssueCertificates(); err != nil {
		t.Fatal(err)
	}

	for name, c := range e.Certificates() {
		if name == "ca" {
			continue
		}

		if got, want := c.VerifyHostname(PeerName) == nil, name == "peer"; got != want {
			t.Errorf("%s certificate (SANs %v) names %s: %v, want %v", name, c.DNSNames, PeerName, got, want)
		}
	}
}

func TestBootstrapRefusals(t *testing.T) {
	ctx := context.Background()

	t.Run("data directory not empty", func(t *testing.T) {
		e := newTest(t)
		if err := os.MkdirAll(filepath.Join(e.dataDir(), "member"), 0o700); err != nil {
			t.Fatal(err)
		}

		if err := e.Bootstrap(ctx, false); !errors.Is(err, ErrBootstrapped) {
			t.Fatalf("err = %v, want ErrBootstrapped", err)
		}
	})

	t.Run("twice", func(t *testing.T) {
		e := newTest(t)
		if err := e.Bootstrap(ctx, false); err != nil {
			t.Fatal(err)
		}

		if err := e.Bootstrap(ctx, false); !errors.Is(err, ErrBootstrapped) {
			t.Fatalf("second: err = %v, want ErrBootstrapped", err)
		}
	})

	t.Run("recover with no snapshot", func(t *testing.T) {
		if err := newTest(t).Bootstrap(ctx, true); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("err = %v, want ErrNoSnapshot", err)
		}
	})
}

func TestBootstrapPlansNewCluster(t *testing.T) {
	e := newTest(t)
	if err := e.Bootstrap(context.Background(), false); err != nil {
		t.Fatal(err)
	}

	plan, err := e.prepare(context.Background(), func(bool, string) {})
	if err != nil || plan.state != newCluster || plan.initial != "cp-1=https://127.0.0.1:2380" {
		t.Fatalf("plan = %+v, %v", plan, err)
	}

	// A new boot forgets the request: a node that left joins again.
	e.NewBoot()

	if err = e.Bootstrap(context.Background(), false); err != nil {
		t.Fatalf("bootstrap after a new boot: %v", err)
	}
}

func TestRecoverRefusesBadSnapshot(t *testing.T) {
	e := newTest(t)

	chunks := [][]byte{bytes.Repeat([]byte("not etcd "), 100), []byte("more")}
	recv := func() ([]byte, error) {
		if len(chunks) == 0 {
			return nil, io.EOF
		}

		c := chunks[0]
		chunks = chunks[1:]

		return c, nil
	}

	if err := e.Recover(recv); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("err = %v, want ErrBadSnapshot", err)
	}

	entries, _ := os.ReadDir(e.cfg.Dir)
	if len(entries) != 0 {
		t.Fatalf("a refused snapshot left %d files behind", len(entries))
	}
}

// Certificates reads the member's certificates as their files hold them:
// none before they are issued, then the three and the CA.
func TestCertificates(t *testing.T) {
	e, err := New(Config{
		Name: "cp-1", Address: "127.0.0.1", Dir: t.TempDir(), Binary: "/nonexistent/etcd",
		CA: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), ClusterToken: "test", Clock: clock.NewFake(testutil.Epoch),
	})
	if err != nil {
		t.Fatal(err)
	}

	if got := e.Certificates(); len(got) != 0 {
		t.Fatalf("before issuance: %v", got)
	}

	if err := os.MkdirAll(e.pkiDir(), 0o700); err != nil {
		t.Fatal(err)
	}

	if _, err := e.IssueCertificates(); err != nil {
		t.Fatal(err)
	}

	got := e.Certificates()
	for _, name := range []string{"server", "peer", "client", "ca"} {
		if got[name] == nil {
			t.Errorf("no %s certificate in %v", name, got)
		}
	}

	if !got["ca"].Equal(e.cfg.CA.Cert) || got["server"].NotAfter.IsZero() {
		t.Fatalf("certificates %v", got)
	}
}

func TestUnstarted(t *testing.T) {
	list := []member{
		{id: 1, name: "cp-1"},
		{id: 2},
		{id: 3},
		{id: 4, name: "cp-4", learner: true},
	}

	if got := unstarted(list, 3); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("unstarted = %v, want [2]: the members other than self with no name", got)
	}
}

// TestAwaitEarlierIsBounded: a joining control plane starts at once when
// no learner was added before it, waits for one that was (saying so once),
// and no longer than learnerWait when that learner never starts; it stops
// waiting when its context ends.
func TestAwaitEarlierIsBounded(t *testing.T) {
	fake := clock.NewFake(testutil.Epoch)

	// No endpoints: no other control plane ever answers, as when the
	// earlier learner's node is gone with the cluster out of reach.
	e, err := New(Config{
		Name: "cp-2", Address: "127.0.0.1", Dir: t.TempDir(), Binary: "/nonexistent/etcd",
		CA: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch), ClusterToken: "test", Clock: fake,
	})
	if err != nil {
		t.Fatal(err)
	}

	plan := startPlan{state: existingCluster, initial: "cp-1=https://127.0.0.2:2380,cp-2=https://127.0.0.1:2380"}

	got, err := e.awaitEarlier(t.Context(), plan, joinOrder{self: 2}, func(bool, string) { t.Error("notified with no earlier learner") })
	if err != nil || got != plan {
		t.Fatalf("no earlier learner: %+v, %v; want the plan at once", got, err)
	}

	type result struct {
		plan  startPlan
		err   error
		notes []string
	}

	wait := func(ctx context.Context) chan result {
		done := make(chan result, 1)

		go func() {
			var notes []string

			p, err := e.awaitEarlier(ctx, plan, joinOrder{self: 2, earlier: []uint64{1}}, func(_ bool, msg string) { notes = append(notes, msg) })
			done <- result{p, err, notes}
		}()

		return done
	}

	done := wait(t.Context())
	start := fake.Now()
	giveUp := time.Now().Add(time.Minute)

	for {
		select {
		case r := <-done:
			if r.err != nil || r.plan != plan || len(r.notes) != 1 {
				t.Fatalf("earlier learner never started: %+v, %v, notes %q; want the plan after learnerWait, one note", r.plan, r.err, r.notes)
			}

			if waited := fake.Now().Sub(start); waited < learnerWait {
				t.Fatalf("gave up after %s, before learnerWait (%s)", waited, learnerWait)
			}

			ctx, cancel := context.WithCancel(t.Context())
			done = wait(ctx)

			if err := fake.WaitForTimers(t.Context(), 1); err != nil {
				t.Fatal(err)
			}

			cancel()

			if r := <-done; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("cancelled: %v, want context.Canceled", r.err)
			}

			return
		default:
		}

		switch {
		case time.Now().After(giveUp):
			t.Fatal("awaitEarlier neither returned nor waited")
		case fake.Pending() == 0: // between two looks
			time.Sleep(time.Millisecond)
		case fake.Now().Sub(start) > learnerWait:
			t.Fatalf("still waiting after %s", fake.Now().Sub(start))
		default:
			fake.Advance(learnerPoll)
		}
	}
}
