package scale

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
)

// steady measures a window of the steady state: each control-plane
// process's CPU, the fleet's calls to trustd, etcd's writes (its raft
// index) and size, and each trustd's sockets and RSS at the end.
func (r *run) steady(ctx context.Context) error {
	cli, err := r.c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // a client

	// The join storm's retries and first heartbeats settle first.
	if !sleep(ctx, heartbeatInterval) {
		return ctx.Err()
	}

	procs := controlPlaneProcesses(r.c)
	cpu0, idx0 := cpuByName(procs), r.raftIndex(ctx, cli)
	calls0, failed0, causes0 := r.fleet.n.calls.Load(), r.fleet.n.failed.Load(), r.fleet.n.causes.snapshot()
	closed0, closedOK0 := r.trustdClosed(ctx)
	t0 := time.Now()

	if !sleep(ctx, r.cfg.Window) {
		return ctx.Err()
	}

	win := time.Since(t0)
	cpu1 := cpuByName(procs)
	closed1, closedOK1 := r.trustdClosed(ctx)
	idx1 := r.raftIndex(ctx, cli)
	s := Steady{
		Window: win, IdleCPU: r.res.Steady.IdleCPU, CPU: map[string]float64{}, TrustdConns: map[string]int{}, TrustdRSS: map[string]uint64{},
		CallsPerSec:  float64(r.fleet.n.calls.Load()-calls0) / win.Seconds(),
		FailedPerSec: float64(r.fleet.n.failed.Load()-failed0) / win.Seconds(),
		Causes:       topCauses(causes0, r.fleet.n.causes.snapshot(), win.Seconds(), 5),
	}

	// A status not read at either end reads 0: no figure, rather than
	// the whole raft index taken for the window's writes.
	if idx0 != 0 && idx1 >= idx0 {
		writes := float64(idx1-idx0) / win.Seconds()
		s.WritesPerSec = &writes
	}

	if db := r.dbSize(ctx, cli); db > 0 {
		s.DBSize = &db
	}

	// Only when every trustd was read at both ends: a count missing at the
	// start would be taken for the whole run's.
	if closedOK0 && closedOK1 {
		s.TrustdClosed = map[string]float64{}

		for reason, n := range closed1 {
			s.TrustdClosed[reason] = (n - closed0[reason]) / win.Seconds()
		}
	}

	for k, v := range cpu1 {
		s.CPU[k] = (v - cpu0[k]).Seconds() / win.Seconds()
	}

	for _, n := range r.c.ControlPlanes() {
		if pid, ok := procs[n.Name+"/trustd"]; ok {
			s.TrustdConns[n.Name], s.TrustdRSS[n.Name] = socketsOf(pid), rssOf(pid)
		}
	}

	for _, w := range r.fleet.workers {
		if w.caller.last.Load() >= t0.UnixNano() || w.sender.Held(nil) {
			r.res.Served++
		}
	}

	s.Renewals, s.RenewalFailed = r.fleet.n.renewals.Load(), r.fleet.n.renewFailed.Load()
	r.res.Steady = s
	r.logf("steady state: %.0f calls/s, %s, control planes %s of a core", s.CallsPerSec, s.etcdFigures(), pct(s.TotalCPU()))

	for _, c := range s.Causes {
		r.logf("steady state: failed %.1f /s: %s", c.PerSec, c.Cause)
	}

	return nil
}

// closeReasons are the reasons trustd's connection limiter counts the
// connections it closed by (metrics.ConnectionsClosed).
var closeReasons = []string{"refused", "evicted", "expired"}

// trustdClosed is how many connections the control planes' trustd have
// closed so far, summed, by reason, from their metrics endpoints; ok is
// false when one could not be read.
func (r *run) trustdClosed(ctx context.Context) (map[string]float64, bool) {
	out, ok := map[string]float64{}, true

	for _, n := range r.c.ControlPlanes() {
		sctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		fams, _, err := metricstest.Scrape(sctx, net.JoinHostPort(n.Address, strconv.Itoa(certs.DefaultTrustdMetricsPort)))

		cancel()

		if err != nil {
			r.logf("trustd metrics of %s: %v", n.Name, err)

			ok = false

			continue
		}

		for _, reason := range closeReasons {
			if v, ok := fams.Value(metrics.ConnectionsClosed, metrics.LabelReason, reason); ok {
				out[reason] += v
			}
		}
	}

	return out, ok
}

// raftIndex is the first control plane's etcd raft index: every write
// committed moves it by one.
func (r *run) raftIndex(ctx context.Context, cli *client.Client) uint64 {
	st := r.etcdStatus(ctx, cli)
	if st == nil {
		return 0
	}

	return st.GetRaftIndex()
}

func (r *run) dbSize(ctx context.Context, cli *client.Client) int64 {
	st := r.etcdStatus(ctx, cli)
	if st == nil {
		return 0
	}

	return st.GetDbSize()
}

type etcdMemberStatus interface {
	GetRaftIndex() uint64
	GetDbSize() int64
}

func (r *run) etcdStatus(ctx context.Context, cli *client.Client) etcdMemberStatus {
	ctx = client.WithNode(ctx, r.c.ControlPlanes()[0].Address)

	for attempt := 1; ; attempt++ {
		resp, err := cli.EtcdStatus(ctx)
		if err == nil && len(resp.GetMessages()) > 0 {
			return resp.GetMessages()[0].GetMemberStatus()
		}

		r.logf("etcd status, attempt %d: %v", attempt, err)

		if attempt == statusAttempts || !sleep(ctx, time.Second) {
			return nil
		}
	}
}

// revocation revokes a client certificate's serial through the API, as
// `aegisctl config revoke SERIAL` does, and measures when it reached each
// hollow worker's list.
func (r *run) revocation(ctx context.Context) error {
	cli, err := r.c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // a client

	b := make([]byte, 16)
	_, _ = rand.Read(b) //nolint:errcheck // crypto/rand does not fail
	b[0] |= 0x10        // no leading zero: the list's form is the same as ours
	serial := hex.EncodeToString(b)

	for _, w := range r.fleet.workers {
		w.watchFor(serial)
	}

	collect()

	t0, err := r.revoke(ctx, revocations.NewRevocationServiceClient(cli.Conn()), serial)
	if err != nil {
		return fmt.Errorf("revoking %s: %w", serial, err)
	}

	call := time.Since(t0)
	lat := r.waitRevoked(ctx, t0)
	p50, p99, p100 := Percentiles(lat)
	r.res.Revocation = Revocation{Call: call, P50: p50, P99: p99, P100: p100, Reached: len(lat)}

	if len(lat) > 0 {
		r.res.Revocation.First = slices.Min(lat)
	}

	if len(lat) < len(r.fleet.workers) {
		r.res.Revocation.P100 = 0
	}

	r.logf("revocation reached %d of %d: 99 %% %s", len(lat), len(r.fleet.workers), dur(p99))

	return nil
}

// revoke revokes serial and returns when the call that did began. A call
// whose connection failed (Unavailable: under load, apid's handshake
// deadline passed) reached no node and is made again, statusAttempts
// times at most, as etcd's status is asked.
func (r *run) revoke(ctx context.Context, rc revocations.RevocationServiceClient, serial string) (time.Time, error) {
	for attempt := 1; ; attempt++ {
		t0 := time.Now()

		_, err := rc.Revoke(ctx, &revocations.RevokeRequest{
			Serial: serial, NotAfter: timestamppb.New(t0.Add(time.Hour)), Reason: "scale harness",
		})
		if err == nil || status.Code(err) != codes.Unavailable || attempt == statusAttempts {
			return t0, err
		}

		r.logf("revocation, attempt %d: %v", attempt, err)

		if !sleep(ctx, time.Second) {
			return t0, ctx.Err()
		}
	}
}

// waitRevoked waits until every worker has the serial, or
// revocationTimeout; it returns each one's time since t0.
func (r *run) waitRevoked(ctx context.Context, t0 time.Time) []time.Duration {
	deadline := t0.Add(revocationTimeout)

	for {
		var lat []time.Duration

		for _, w := range r.fleet.workers {
			if at := w.revoked.Load(); at != 0 {
				lat = append(lat, time.Unix(0, at).Sub(t0))
			}
		}

		if len(lat) == len(r.fleet.workers) || time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			return lat
		}
	}
}

// cli times `aegisctl get members` and `aegisctl health` on the first
// control plane.
func (r *run) cli(ctx context.Context) error {
	out, d, err := r.aegisctl(ctx, "get", "members")
	if err != nil {
		return err
	}

	r.res.CLI.Members = d
	r.res.CLI.MembersListed = max(bytes.Count(out, []byte("\n"))-1, 0)

	_, r.res.CLI.Health, err = r.aegisctl(ctx, "health", "--wait-timeout", "1m")
	if err != nil {
		r.res.CLI.HealthErr = firstLine(err.Error())
	}

	r.logf("aegisctl: get members %s (%d), health %s", dur(r.res.CLI.Members), r.res.CLI.MembersListed, dur(r.res.CLI.Health))

	return nil
}

func (r *run) aegisctl(ctx context.Context, args ...string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()

	cp := r.c.ControlPlanes()[0].Address
	args = append([]string{"--aegisconfig", r.c.ClientConfigPath(), "-e", cp, "-n", cp}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(r.cfg.BinDir, "aegisctl"), args...)

	var stderr bytes.Buffer
	cmd.Stderr = &stderr

	t0 := time.Now()
	out, err := cmd.Output()
	d := time.Since(t0)

	if err != nil {
		return out, d, fmt.Errorf("aegisctl %s: %w: %s", strings.Join(args[6:], " "), err, firstLine(stderr.String()))
	}

	return out, d, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
