package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/pkg/v3/flags"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
)

// streamGrace is how long a stopping member lets its clients' calls end by
// themselves before it ends the streams still open. etcd's own stop waits
// its whole request timeout (7 s with the default election timeout) for
// them, and watches and lease keep-alives never end by themselves: the
// member's client port stayed closed that long at each restart of a
// rotation. A unary call (a write waiting for its apply) ends within a
// few milliseconds on a healthy cluster; the streams ended here are
// resumed by etcd's clients on another member.
const streamGrace = time.Second

// serve runs an etcd member configured by etcd's flags until SIGTERM or
// SIGINT, and returns the exit code.
func serve(args []string) int {
	cfg, err := parseConfig(args)
	if errors.Is(err, errVersion) {
		fmt.Printf("etcd Version: %s\n", version.Version)

		return 0
	}

	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)

		return 2
	}

	grpc.EnableTracing = false

	cfg.SetupGlobalLoggers()

	// From before the start: a member waiting for its cluster stops too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	m, err := startMember(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)

		return 1
	}

	select {
	case s := <-sig:
		cfg.GetLogger().Info("stopping etcd", zap.String("signal", s.String()))
		m.stop(streamGrace)

		return 0
	case err := <-m.etcd.Err():
		cfg.GetLogger().Error("etcd failed", zap.Error(err))
		m.stop(streamGrace)

		return 1
	case <-m.etcd.Server.StopNotify():
		// Removed from its cluster: etcd's own entry point exits 0 too.
		m.stop(streamGrace)

		return 0
	}
}

// errVersion: the command line asks for the version.
var errVersion = errors.New("version asked")

// parseConfig reads etcd's command line as etcd's own entry point does:
// every flag of embed.Config, and the initial cluster state.
func parseConfig(args []string) (*embed.Config, error) {
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	// The caller reports the error; etcd's flag defaults are too many to print.
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)

	state := flags.NewSelectiveStringValue(embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting)
	fs.Var(state, "initial-cluster-state", "new to bootstrap a cluster, existing to join one")

	printVersion := fs.Bool("version", false, "print the version and exit")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}

	if *printVersion {
		return nil, errVersion
	}

	if fs.NArg() != 0 {
		return nil, fmt.Errorf("%q is not a flag", fs.Arg(0))
	}

	fromFlagSet(cfg, fs)
	cfg.ClusterState = state.String()

	fs.Visit(func(f *flag.Flag) { cfg.FlagsExplicitlySet[f.Name] = true })

	if cfg.Dir == "" {
		return nil, errors.New("--data-dir is required")
	}

	if err := cfg.Validate(); err != nil {
		return nil, err
	}

	return cfg, nil
}

// fromFlagSet sets what AddFlags leaves in the flag set: the list and URL
// flags.
func fromFlagSet(cfg *embed.Config, fs *flag.FlagSet) {
	cfg.ListenPeerUrls = flags.UniqueURLsFromFlag(fs, "listen-peer-urls")
	cfg.AdvertisePeerUrls = flags.UniqueURLsFromFlag(fs, "initial-advertise-peer-urls")
	cfg.ListenClientUrls = flags.UniqueURLsFromFlag(fs, "listen-client-urls")
	cfg.ListenClientHttpUrls = flags.UniqueURLsFromFlag(fs, "listen-client-http-urls")
	cfg.AdvertiseClientUrls = flags.UniqueURLsFromFlag(fs, "advertise-client-urls")
	cfg.ListenMetricsUrls = flags.UniqueURLsFromFlag(fs, "listen-metrics-urls")
	cfg.DiscoveryCfg.Endpoints = flags.UniqueStringsFromFlag(fs, "discovery-endpoints")
	cfg.CORS = flags.UniqueURLsMapFromFlag(fs, "cors")
	cfg.HostWhitelist = flags.UniqueStringsMapFromFlag(fs, "host-whitelist")
	cfg.ClientTLSInfo.AllowedHostnames = flags.StringsFromFlag(fs, "client-cert-allowed-hostname")
	cfg.PeerTLSInfo.AllowedCNs = flags.StringsFromFlag(fs, "peer-cert-allowed-cn")
	cfg.PeerTLSInfo.AllowedHostnames = flags.StringsFromFlag(fs, "peer-cert-allowed-hostname")
	cfg.CipherSuites = flags.StringsFromFlag(fs, "cipher-suites")
	cfg.MaxConcurrentStreams = flags.Uint32FromFlag(fs, "max-concurrent-streams")
	cfg.LogOutputs = flags.UniqueStringsFromFlag(fs, "log-outputs")

	// As etcd's entry point: client URLs listened on and not advertised
	// are an error (Validate), not localhost's default.
	if flags.IsSet(fs, "listen-client-urls") && !flags.IsSet(fs, "advertise-client-urls") {
		cfg.AdvertiseClientUrls = nil
	}

	// Discovery replaces the default initial cluster.
	discovery := cfg.DNSCluster != "" || cfg.DNSClusterServiceName != "" || len(cfg.DiscoveryCfg.Endpoints) > 0
	if discovery && !flags.IsSet(fs, "initial-cluster") {
		cfg.InitialCluster = ""
	}
}

// member is a started etcd server and the gRPC servers of its client
// ports.
type member struct {
	etcd *embed.Etcd

	mu   sync.Mutex
	grpc []*grpc.Server
}

// startMember starts the server. It does not wait for the member to join
// its cluster, which takes a quorum: a stop is obeyed meanwhile too.
func startMember(cfg *embed.Config) (*member, error) {
	m := &member{}
	cfg.ServiceRegister = func(s *grpc.Server) {
		m.mu.Lock()
		m.grpc = append(m.grpc, s)
		m.mu.Unlock()
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}

	m.etcd = e

	return m, nil
}

// stop closes the member as etcd does (its client ports first, then raft,
// handing the leadership to another member, then its peer port), except
// that streams still open grace after the stop began are ended.
func (m *member) stop(grace time.Duration) {
	stopGracefully(clock.Real(), m.close, m.endStreams, grace)
}

// close closes the member. Its client ports serve only once it is ready
// (has joined its cluster, which takes a quorum), and etcd's Close waits
// for them: a member not ready stops its raft first, which ends that wait.
// It has served no client, and a stop of raft loses nothing it persisted.
func (m *member) close() {
	select {
	case <-m.etcd.Server.ReadyNotify():
	default:
		m.etcd.Server.Stop()
	}

	m.etcd.Close()
}

// endStreams ends every call still open on the member's client ports.
func (m *member) endStreams() {
	m.mu.Lock()
	servers := append([]*grpc.Server(nil), m.grpc...)
	m.mu.Unlock()

	for _, s := range servers {
		s.Stop()
	}
}

// stopGracefully runs closeFn and, if it has not returned after grace,
// endStreams (once) while it goes on; it returns when closeFn does.
func stopGracefully(c clock.Clock, closeFn, endStreams func(), grace time.Duration) {
	done := make(chan struct{})

	go func() {
		defer close(done)
		closeFn()
	}()

	t := c.NewTimer(grace)
	defer t.Stop()

	select {
	case <-done:
		return
	case <-t.C():
		endStreams()
	}

	<-done
}
