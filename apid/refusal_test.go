package apid_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
)

// refuseHandshakes makes n handshakes with an expired client certificate
// from source, each refused. (A client without a certificate completes
// the handshake, for health probes, and is refused at the call.)
func refuseHandshakes(t *testing.T, expired []tls.Certificate, addr, source string, n int) {
	t.Helper()

	host, _, _ := net.SplitHostPort(addr)
	cfg := &tls.Config{ //nolint:gosec // only the server's refusal matters
		ServerName: host, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		Certificates: expired, NextProtos: []string{"h2"},
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: callTimeout}

	for range n {
		conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
		if err != nil {
			continue // refused during the handshake
		}

		// TLS 1.3: the server's verdict on the client comes after the
		// client's side of the handshake, as an alert on the first read.
		_ = conn.SetReadDeadline(time.Now().Add(callTimeout))
		if _, err = conn.Read(make([]byte, 1)); err == nil {
			t.Error("a handshake with an expired client certificate was accepted")
		}

		conn.Close()
	}
}

// TestHandshakeRefusalsAggregated: a flood of refused handshakes logs one
// line in full per source and one summary counting the rest, written when
// the server stops; sources beyond the table are summarized together.
// The metrics count every refusal, by reason.
func TestHandshakeRefusalsAggregated(t *testing.T) {
	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	reg := prometheus.NewRegistry()
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{
		IP: testIP, Logger: sink.Logger(), Clock: clock.NewFake(time.Now()), Metrics: reg,
	})

	const flood = 200

	expired := p.ClientTLS(t, p.ExpiredClient(t, role.Admin)).Certificates
	refuseHandshakes(t, expired, node.Addr, "127.0.8.1", flood)
	refuseHandshakes(t, expired, node.Addr, "127.0.8.2", 3)

	node.Stop()

	for _, tc := range []struct {
		source string
		count  float64
	}{{"127.0.8.1", flood - 1}, {"127.0.8.2", 2}} {
		full := 0

		for _, r := range sink.Find(t, "tls handshake refused") {
			if peer, _ := r[logkey.Peer].(string); strings.HasPrefix(peer, tc.source+":") {
				full++
			}
		}

		sums := sink.Find(t, "tls handshakes refused", logkey.Source, tc.source)
		if full != 1 || len(sums) != 1 || sums[0][logkey.Count] != tc.count {
			t.Fatalf("%s: %d lines in full, summaries %v; want 1 and a count of %v", tc.source, full, sums, tc.count)
		}

		if kinds, _ := sums[0][logkey.Kinds].(map[string]any); kinds["certificate"] != tc.count {
			t.Fatalf("%s: kinds %v", tc.source, kinds)
		}
	}

	fams := metricstest.Gather(t, reg)
	for reason, want := range map[string]float64{"certificate": flood + 3, "revoked": 0, "no_certificate": 0} {
		got := fams.Must(t, metrics.HandshakesRefused, metrics.LabelListener, "apid", metrics.LabelReason, reason)
		if got != want {
			t.Errorf("%s{reason=%q} = %v, want %v", metrics.HandshakesRefused, reason, got, want)
		}
	}
}

// TestHandshakeRefusalsBounded: sources beyond the table share one
// summary, and every refusal is counted.
func TestHandshakeRefusalsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("many handshakes")
	}

	var sink logtest.Sink

	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Logger: sink.Logger(), Clock: clock.NewFake(time.Now())})

	const sources, each = apid.MaxRefusalSources + 76, 2

	expired := p.ClientTLS(t, p.ExpiredClient(t, role.Admin)).Certificates

	var wg sync.WaitGroup

	for w := range 8 {
		wg.Go(func() {
			for i := w; i < sources; i += 8 {
				refuseHandshakes(t, expired, node.Addr, fmt.Sprintf("127.0.%d.%d", 10+i/250, 1+i%250), each)
			}
		})
	}

	wg.Wait()
	node.Stop()

	full := len(sink.Find(t, "tls handshake refused"))
	sums := sink.Find(t, "tls handshakes refused")
	counted := full

	for _, s := range sums {
		n, _ := s[logkey.Count].(float64)
		counted += int(n)
	}

	if full != apid.MaxRefusalSources || len(sums) != apid.MaxRefusalSources+1 || counted != sources*each {
		t.Fatalf("%d lines in full, %d summaries, %d refusals counted; want %d, %d and %d",
			full, len(sums), counted, apid.MaxRefusalSources, apid.MaxRefusalSources+1, sources*each)
	}
}
