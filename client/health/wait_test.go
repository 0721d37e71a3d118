package health

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestWaitNodesOnItsClock: the rounds are paced and the timeout measured
// on the clock of the options, progress reports each change once, and the
// verdict names the node that never answered.
func TestWaitNodesOnItsClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Nothing listens there: every round finds the node not answering.
	c, err := client.New(ctx, client.WithEndpoints("127.0.0.1:1"), client.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS13}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck // test

	clk := clock.NewFake(time.Now())

	var (
		mu    sync.Mutex
		lines []string
	)

	opts := Options{
		Client: c, Endpoints: []string{"127.0.0.1:1"}, Timeout: 90 * time.Second, Clock: clk,
		Progress: func(_ time.Duration, line string) {
			mu.Lock()
			defer mu.Unlock()

			lines = append(lines, line)
		},
	}

	type outcome struct {
		res Result
		err error
	}

	done := make(chan outcome, 1)

	go func() {
		res, err := WaitNodes(ctx, opts)
		done <- outcome{res, err}
	}()

	for range 2 { // the rounds at 0 and 60s wait; the one at 120s is past the timeout
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatalf("the wait never paused on its clock: %v", err)
		}

		clk.Advance(time.Minute)
	}

	got := <-done
	if got.err == nil || !strings.HasPrefix(got.err.Error(), "not healthy after 1m30s: endpoint 127.0.0.1:1: not answering") {
		t.Fatalf("err = %v, want the timeout's verdict", got.err)
	}

	if p := got.res.Round["endpoint 127.0.0.1:1"]; !strings.HasPrefix(p, "not answering") {
		t.Fatalf("round = %v, want the endpoint not answering", got.res.Round)
	}

	mu.Lock()
	defer mu.Unlock()

	if len(lines) != 1 || !strings.HasPrefix(lines[0], "endpoint 127.0.0.1:1: waiting: not answering") {
		t.Fatalf("progress = %q, want one line for the one change", lines)
	}
}
