package main

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/aegis-os/aegis/internal/clock"
)

func TestStopGracefully(t *testing.T) {
	t.Run("a close that ends within the grace ends no stream", func(t *testing.T) {
		var ended atomic.Bool

		stopGracefully(clock.NewFake(time.Unix(0, 0)), func() {}, func() { ended.Store(true) }, time.Second)

		if ended.Load() {
			t.Fatal("streams ended although the close returned within the grace")
		}
	})

	t.Run("streams open after the grace are ended, and the close is awaited", func(t *testing.T) {
		fake := clock.NewFake(time.Unix(0, 0))
		streams := make(chan struct{})
		returned := make(chan struct{})

		go func() {
			defer close(returned)
			// The close waits for the streams, as etcd's does.
			stopGracefully(fake, func() { <-streams }, func() { close(streams) }, time.Second)
		}()

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		if err := fake.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		fake.Advance(999 * time.Millisecond)

		select {
		case <-returned:
			t.Fatal("returned before the grace ended")
		case <-streams:
			t.Fatal("streams ended before the grace")
		default:
		}

		fake.Advance(time.Millisecond)

		select {
		case <-returned:
		case <-ctx.Done():
			t.Fatal("the streams were not ended after the grace")
		}
	})
}

func TestParseConfig(t *testing.T) {
	base := []string{"--name", "m", "--data-dir", "/var/lib/etcd"}

	cfg, err := parseConfig(append(base, "--listen-client-urls", "https://127.0.0.1:2379",
		"--advertise-client-urls", "https://127.0.0.1:2379", "--initial-cluster-state", "existing",
		"--log-outputs", "stderr"))
	if err != nil {
		t.Fatal(err)
	}

	if len(cfg.ListenClientUrls) != 1 || cfg.ListenClientUrls[0].Host != "127.0.0.1:2379" ||
		cfg.ClusterState != "existing" || cfg.LogOutputs[0] != "stderr" || !cfg.FlagsExplicitlySet["initial-cluster-state"] {
		t.Errorf("flags not carried over: %v %q %v", cfg.ListenClientUrls, cfg.ClusterState, cfg.LogOutputs)
	}

	for name, args := range map[string][]string{
		"a word that is no flag":     append(base, "serve"),
		"an unknown cluster state":   append(base, "--initial-cluster-state", "maybe"),
		"an unknown flag":            append(base, "--no-such-flag"),
		"no data directory":          {"--name", "m"},
		"client URLs not advertised": append(base, "--listen-client-urls", "http://127.0.0.1:2379"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseConfig(args); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestMemberStopEndsStreams runs a real member with a watch open on it:
// etcd's own stop would wait its 7 s request timeout for the watch.
func TestMemberStopEndsStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}

	m, client := startTestMember(t, "")

	select {
	case <-m.etcd.Server.ReadyNotify():
	case <-time.After(10 * time.Second):
		t.Fatal("the member did not become ready")
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close() //nolint:errcheck // test client

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A lease kept alive and a watch: the two streams machined and trustd
	// keep open on their members.
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := cli.KeepAlive(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}

	wch := cli.Watch(clientv3.WithRequireLeader(ctx), "k")

	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}

	<-wch

	start := time.Now()
	m.stop(streamGrace)

	if took := time.Since(start); took > streamGrace+3*time.Second {
		t.Fatalf("the stop took %v with a watch open", took)
	}
}

// TestMemberStopBeforeReady stops a member that waits for the other
// member of its initial cluster: it stops without it.
func TestMemberStopBeforeReady(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}

	m, _ := startTestMember(t, ",n="+freeURL(t))

	stopped := make(chan struct{})

	go func() {
		defer close(stopped)
		m.stop(streamGrace)
	}()

	select {
	case <-stopped:
	case <-time.After(streamGrace + 5*time.Second):
		t.Fatal("a member waiting for its cluster did not stop")
	}

	select {
	case <-m.etcd.Server.ReadyNotify():
		t.Fatal("the member became ready without its cluster")
	default:
	}
}

// startTestMember starts member m of a new cluster of m and others (",NAME=URL…"),
// plain HTTP on loopback, and returns it and its client URL.
func startTestMember(t *testing.T, others string) (*member, string) {
	t.Helper()

	client, peer := freeURL(t), freeURL(t)

	cfg, err := parseConfig([]string{
		"--name", "m", "--data-dir", t.TempDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m=" + peer + others, "--initial-cluster-state", "new",
		"--log-level", "error",
	})
	if err != nil {
		t.Fatal(err)
	}

	m, err := startMember(cfg)
	if err != nil {
		t.Fatal(err)
	}

	return m, client
}

// freeURL is an http URL on a free loopback port.
func freeURL(t *testing.T) string {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	port := l.Addr().(*net.TCPAddr).Port
	l.Close() //nolint:errcheck // only its port was wanted

	return (&url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}).String()
}
