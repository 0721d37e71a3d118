package refusals_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/refusals"
)

const summary = "things refused"

func newAggregator(t *testing.T, maxSources int) (*refusals.Aggregator, *clock.Fake, *logtest.Sink) {
	t.Helper()

	clk := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	sink := &logtest.Sink{}
	agg := refusals.New(refusals.Config{
		Logger: sink.Logger(), Summary: summary, Clock: clk, Interval: time.Minute, MaxSources: maxSources,
	})

	return agg, clk, sink
}

// run starts the aggregator's loop and waits until it armed its timer.
func run(t *testing.T, agg *refusals.Aggregator, clk *clock.Fake) (stop func()) {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)
		agg.Run(ctx)
	}()

	waitTimer(t, clk)

	return func() {
		cancel()
		<-done
	}
}

func waitTimer(t *testing.T, clk *clock.Fake) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

func refuse(agg *refusals.Aggregator, source, kind string) {
	agg.Refuse(context.Background(), source, kind, "refused", slog.String("source", source), slog.String("kind", kind))
}

// summaries returns the summary lines by source.
func summaries(t *testing.T, sink *logtest.Sink) map[string]map[string]any {
	t.Helper()

	out := map[string]map[string]any{}

	for _, r := range sink.Records(t) {
		if r["msg"] == summary {
			src, _ := r[logkey.Source].(string)
			if out[src] != nil {
				t.Fatalf("two summaries of %s", src)
			}

			out[src] = r
		}
	}

	return out
}

func TestAggregateOneSource(t *testing.T) {
	agg, clk, sink := newAggregator(t, 16)
	stop := run(t, agg, clk)
	defer stop()

	for i := range 1000 {
		kind := "Unauthenticated"
		if i%4 == 3 {
			kind = "ResourceExhausted"
		}

		refuse(agg, "127.0.0.9", kind)
	}

	if got := len(sink.Find(t, "refused")); got != 1 {
		t.Fatalf("%d lines in full before the interval ended, want 1", got)
	}

	if got := len(summaries(t, sink)); got != 0 {
		t.Fatalf("%d summaries before the interval ended", got)
	}

	clk.Advance(time.Minute)
	waitTimer(t, clk) // the next interval is armed once the summary is written

	s := summaries(t, sink)["127.0.0.9"]
	if s == nil || s[logkey.Count] != float64(999) {
		t.Fatalf("summary %v, want a count of 999", s)
	}

	kinds, _ := s[logkey.Kinds].(map[string]any)
	if kinds["Unauthenticated"] != float64(749) || kinds["ResourceExhausted"] != float64(250) {
		t.Fatalf("kinds %v", kinds)
	}

	// A new interval: the source's first refusal is written in full again.
	refuse(agg, "127.0.0.9", "Unauthenticated")

	if got := len(sink.Find(t, "refused")); got != 2 {
		t.Fatalf("%d lines in full, want 2", got)
	}
}

func TestAggregateSingleRefusalHasNoSummary(t *testing.T) {
	agg, clk, sink := newAggregator(t, 16)
	stop := run(t, agg, clk)

	refuse(agg, "127.0.0.9", "Unauthenticated")
	clk.Advance(time.Minute)
	waitTimer(t, clk)
	stop()

	if recs := sink.Records(t); len(recs) != 1 {
		t.Fatalf("records %v, want the one refusal in full", recs)
	}
}

func TestAggregateFlushesAtShutdown(t *testing.T) {
	agg, clk, sink := newAggregator(t, 16)
	stop := run(t, agg, clk)

	for range 5 {
		refuse(agg, "127.0.0.9", "Unauthenticated")
	}

	stop()

	if s := summaries(t, sink)["127.0.0.9"]; s == nil || s[logkey.Count] != float64(4) {
		t.Fatalf("summary at shutdown %v, want a count of 4", s)
	}
}

// TestAggregateBounded floods from many more sources than the table holds:
// the table's sources get a full line and a summary each, the rest one
// summary together, and every refusal is counted.
func TestAggregateBounded(t *testing.T) {
	const table, sources, each = 8, 5000, 3

	agg, _, sink := newAggregator(t, table)

	for i := range sources {
		for range each {
			refuse(agg, fmt.Sprintf("10.0.%d.%d", i/256, i%256), "Unauthenticated")
		}
	}

	agg.Flush(context.Background())

	full := len(sink.Find(t, "refused"))
	sums := summaries(t, sink)

	if full != table || len(sums) != table+1 {
		t.Fatalf("%d full lines and %d summaries, want %d and %d", full, len(sums), table, table+1)
	}

	counted := full
	for _, s := range sums {
		n, _ := s[logkey.Count].(float64)
		counted += int(n)
	}

	if counted != sources*each {
		t.Fatalf("%d refusals accounted for, want %d", counted, sources*each)
	}

	if other := sums[refusals.OtherSources]; other[logkey.Count] != float64((sources-table)*each) {
		t.Fatalf("other sources: %v", other)
	}
}

func TestAggregateBoundsKinds(t *testing.T) {
	agg, _, sink := newAggregator(t, 16)

	for i := range 1000 {
		refuse(agg, "127.0.0.9", fmt.Sprintf("kind-%d", i))
	}

	agg.Flush(context.Background())

	kinds, _ := summaries(t, sink)["127.0.0.9"][logkey.Kinds].(map[string]any)
	if len(kinds) > 33 {
		t.Fatalf("%d kinds kept", len(kinds))
	}
}
