package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/bench"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The stream tests' node lives in 127.8.7.0/24.
const streamsCIDR = "127.8.7.0/24"

// The flood: floodIdentities readers, each over floodConns connections,
// each connection trying floodPerConn follows (1800 in all).
const (
	floodIdentities = 4
	floodConns      = 3
	floodPerConn    = 150
)

// maxDaemonRSS is the bound on apid's and machined's memory whatever a
// client does.
const maxDaemonRSS = 150 << 20

// TestStreams floods a real node (machined and its apid) with Events
// follows, then follows with a certificate that expires.
func TestStreams(t *testing.T) {
	needBinaries(t)

	c, err := localcluster.Create(context.Background(), localcluster.Options{
		Name: "streams", ControlPlanes: 1, CIDR: netip.MustParsePrefix(streamsCIDR),
		StateDir: testutil.ShortTempDir(t), BinDir: binDir, Timeout: faultTimeout,
		Runtime: certs.RuntimeProcess, // not about containers: the quicker runtime
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s:\n%s", c.Nodes[0].Name, c.Tail(c.Nodes[0], 40))
		}

		if err := c.Destroy(); err != nil {
			t.Errorf("destroying the cluster: %v", err)
		}
	})

	admin := talosClient(t, c.ClientConfigPath())

	t.Run("flood", func(t *testing.T) { streamFlood(t, c, admin) })
	t.Run("certificate expires", func(t *testing.T) { followOutlivesCertificate(t, admin) })
}

// daemonRSS reads the memory of the node's machined and apid.
type daemonRSS struct{ machined, apid int }

// read returns VmRSS of each.
func (d daemonRSS) read(t *testing.T) [2]uint64 {
	t.Helper()

	return [2]uint64{procStatus(t, d.machined, "VmRSS"), procStatus(t, d.apid, "VmRSS")}
}

// anon returns RssAnon of each: VmRSS without the pages of the binary,
// which the first calls of each kind page in and which stay.
func (d daemonRSS) anon(t *testing.T) [2]uint64 {
	t.Helper()

	return [2]uint64{procStatus(t, d.machined, "RssAnon"), procStatus(t, d.apid, "RssAnon")}
}

// procStatus reads a field in kB of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, field string) uint64 {
	t.Helper()

	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}

	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}

			return kb << 10
		}
	}

	t.Fatalf("no %s for %d", field, pid)

	return 0
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// streamFlood: readers open far more follows than the caps allow over a
// few connections each; the excess is refused ResourceExhausted naming
// the cap, another client is still served, and apid's and machined's
// memory stays under maxDaemonRSS and comes back down once the follows
// close.
func streamFlood(t *testing.T, c *localcluster.Cluster, admin *client.Client) {
	flood, stop := context.WithCancel(ctx(t))
	defer stop()

	// Another reader, made before the idle figures so that they hold the
	// code that issues its certificate.
	other := readerClients(t, flood, admin, time.Hour, 1)
	procs := daemonRSS{machined: c.Nodes[0].PID, apid: nodeServicePID(c.Nodes[0], "apid")}
	idle, idleAnon := procs.read(t), procs.anon(t)

	refused := bench.Refusals{}
	opened := floodFollows(t, flood, admin, floodIdentities-1, refused)

	if want := (floodIdentities - 1) * apid.MaxStreamsPerIdentity; opened != want {
		t.Fatalf("%d follows opened, want %d; refusals %v", opened, want, refused)
	}

	// The other reader is served: a follow and a unary call.
	if _, err := bench.OpenFollows(flood, other[0], 1, refused); err != nil || refused.Total() != (floodIdentities-1)*(floodConns*floodPerConn-apid.MaxStreamsPerIdentity) {
		t.Fatalf("another reader's follow: %v, refusals %v", err, refused)
	}

	if _, err := other[0].Version(ctx(t)); err != nil {
		t.Fatalf("another reader's Version: %v", err)
	}

	// The last flooding reader fills the node.
	opened += 1 + floodFollows(t, flood, admin, 1, refused)
	peak, peakAnon := procs.read(t), procs.anon(t)

	t.Logf("%d follows open of %d tried; refused: %v", opened, floodIdentities*floodConns*floodPerConn+1, refused)

	wantRefusals := []string{
		fmt.Sprintf("on this connection (limit %d)", apid.MaxStreamsPerConnection),
		fmt.Sprintf("for this client certificate's key (limit %d)", apid.MaxStreamsPerIdentity),
		fmt.Sprintf("on this node (limit %d)", apid.MaxStreams),
	}
	for _, w := range wantRefusals {
		if refused[w] == 0 {
			t.Errorf("no refusal %q among %v", w, refused)
		}
	}

	if opened != apid.MaxStreams {
		t.Errorf("%d follows open, want the node's cap %d", opened, apid.MaxStreams)
	}

	stop()

	waitAnonDown(t, procs, idleAnon, peakAnon)
	after := procs.read(t)

	for i, name := range []string{"machined", "apid"} {
		t.Logf("%s RSS: idle %s, %d follows %s (%.1f KiB per follow), after %s", name, mib(idle[i]), opened, mib(peak[i]),
			float64(peak[i]-idle[i])/1024/float64(opened), mib(after[i]))

		if peak[i] > maxDaemonRSS {
			t.Errorf("%s RSS %s under the flood, over %s", name, mib(peak[i]), mib(maxDaemonRSS))
		}
	}
}

// floodFollows opens follows as n new readers, over floodConns connections
// each, floodPerConn tries per connection, kept open until ctx ends.
func floodFollows(t *testing.T, ctx context.Context, admin *client.Client, n int, refused bench.Refusals) int {
	t.Helper()

	opened := 0

	for range n {
		for _, cl := range readerClients(t, ctx, admin, time.Hour, floodConns) {
			got, err := bench.OpenFollows(ctx, cl, floodPerConn, refused)
			if err != nil {
				t.Fatal(err)
			}

			opened += got
		}
	}

	return opened
}

// readerClients makes a new os:reader identity of ttl and opens conns
// connections with it, closed when the test ends.
func readerClients(t *testing.T, ctx context.Context, admin *client.Client, ttl time.Duration, conns int) []*client.Client {
	t.Helper()

	cfg, err := bench.ReaderConfig(ctx, admin, ttl)
	if err != nil {
		t.Fatal(err)
	}

	clients, err := bench.Connect(ctx, cfg, conns)
	t.Cleanup(func() { bench.CloseAll(clients) }) //nolint:errcheck // clients of the test

	if err != nil {
		t.Fatal(err)
	}

	return clients
}

// anonSlack is how far above idle a daemon's anonymous memory may stay
// once the follows closed, whatever the flood added: machined keeps working
// meanwhile (health checks, etcd's, the certificates service), and a few
// megabytes of that are not the flood's. Before the caps, the memory kept
// after a flood was tens of megabytes over idle.
const anonSlack = 8 << 20

// waitAnonDown waits until both daemons' anonymous memory is back within
// a quarter of what the flood added (or anonSlack of idle); it fails the
// test if that does not happen within a minute.
func waitAnonDown(t *testing.T, procs daemonRSS, idle, peak [2]uint64) {
	t.Helper()

	deadline := time.Now().Add(time.Minute)

	for {
		now := procs.anon(t)
		down := true

		for i := range now {
			if now[i] > idle[i]+max((peak[i]-min(idle[i], peak[i]))/4, anonSlack) {
				down = false
			}
		}

		if down {
			t.Logf("anonymous memory (machined, apid): idle %s, %s; peak %s, %s; after %s, %s",
				mib(idle[0]), mib(idle[1]), mib(peak[0]), mib(peak[1]), mib(now[0]), mib(now[1]))

			return
		}

		if time.Now().After(deadline) {
			t.Errorf("anonymous memory (machined, apid) after the follows closed: %s, %s; idle %s, %s; peak %s, %s",
				mib(now[0]), mib(now[1]), mib(idle[0]), mib(idle[1]), mib(peak[0]), mib(peak[1]))

			return
		}

		time.Sleep(250 * time.Millisecond)
	}
}

// followOutlivesCertificate: a follow opened with a client certificate of
// 30 s is ended with Unauthenticated, saying it expired, once it has.
func followOutlivesCertificate(t *testing.T, admin *client.Client) {
	cl := readerClients(t, ctx(t), admin, 30*time.Second, 1)[0]

	der, err := base64.StdEncoding.DecodeString(cl.GetConfigContext().Crt)
	if err != nil {
		t.Fatal(err)
	}

	crt, err := ca.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	fctx, cancel := context.WithDeadline(context.Background(), crt.NotAfter.Add(30*time.Second))
	defer cancel()

	stream, err := cl.MachineClient.Events(fctx, &machine.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}

	ended := time.Now()

	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "the client certificate expired at") {
		t.Fatalf("follow after its certificate expired (%s): %v, want Unauthenticated saying it expired",
			crt.NotAfter.Format(time.RFC3339), err)
	}

	if ended.Before(crt.NotAfter) || errors.Is(fctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ended at %s, certificate valid until %s", ended.Format(time.RFC3339Nano), crt.NotAfter.Format(time.RFC3339))
	}

	t.Logf("follow ended %s after the certificate expired: %v", ended.Sub(crt.NotAfter).Round(time.Millisecond), err)
}
