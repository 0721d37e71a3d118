// Package refusals writes refusals to a log without letting a flood of them
// flood it: the first refusal of a source in an interval is written in
// full, the further ones are counted and written as one summary line per
// source when the interval ends (and at shutdown). The table of sources is
// bounded; when it is full, refusals of sources not in it are folded into
// one summary of "other" sources. Every refusal is thus accounted for,
// individually or in a count, and the log grows by at most two lines per
// tracked source and interval, plus one.
//
// Aegis uses it wherever a refusal is logged: trustd's audit records of
// refused certificate requests, apid's refused TLS handshakes, refused
// calls of the authorization interceptors.
package refusals

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// OtherSources is the source of the summary of the refusals whose sources
// did not fit in the table.
const OtherSources = "other"

// Defaults of Config.
const (
	// DefaultInterval is how long refusals of a source are counted before
	// their summary is written: under a sustained flood a source costs two
	// lines a minute.
	DefaultInterval = time.Minute

	// DefaultMaxSources bounds the sources counted per interval. Beyond
	// it, refusals are counted together; the table, and the log lines
	// written per interval, stay bounded whatever the number of sources.
	DefaultMaxSources = 1024

	// maxKinds bounds the kinds counted per source; further kinds are
	// counted as otherKind. Kinds come from small fixed sets (gRPC codes),
	// so this only guards against a caller passing free text.
	maxKinds  = 32
	otherKind = "other"
)

// Config configures an Aggregator.
type Config struct {
	// Logger receives the lines. Nil discards.
	Logger *slog.Logger
	// Summary is the message of summary lines, such as "certificate
	// refusals". Required.
	Summary string
	// Clock times the intervals. Nil means the system clock.
	Clock clock.Clock
	// Interval is how long refusals are counted before they are
	// summarized. Zero means DefaultInterval.
	Interval time.Duration
	// MaxSources bounds the sources counted per interval. Zero means
	// DefaultMaxSources.
	MaxSources int
}

// Aggregator counts refusals per source. It is safe for concurrent use.
type Aggregator struct {
	cfg Config

	mu      sync.Mutex
	since   time.Time
	sources map[string]*tally
	order   []string // sources in order of first refusal, for a stable output
	other   tally
}

// tally is what an interval holds about one source: the refusals not
// written in full, by kind.
type tally struct {
	count int
	kinds map[string]int
}

// New returns an Aggregator; Run writes its summaries.
func New(cfg Config) *Aggregator {
	cfg.Clock = defaults.Clock(cfg.Clock)

	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}

	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}

	cfg.Logger = defaults.Logger(cfg.Logger)

	return &Aggregator{cfg: cfg, since: cfg.Clock.Now(), sources: map[string]*tally{}}
}

// Refuse records one refusal of source. The first of the source in the
// interval is written now as msg with attrs at level warn; later ones are
// counted under kind, for the summary.
func (a *Aggregator) Refuse(ctx context.Context, source, kind, msg string, attrs ...slog.Attr) {
	if !a.count(source, kind) {
		return
	}

	a.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// count reports whether the refusal is the first of its source in the
// interval (to be written in full); otherwise it counts it.
func (a *Aggregator) count(source, kind string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()

	t, ok := a.sources[source]

	switch {
	case ok:
		t.add(kind)

		return false
	case len(a.sources) >= a.cfg.MaxSources:
		a.other.add(kind)

		return false
	default:
		a.sources[source] = &tally{}
		a.order = append(a.order, source)

		return true
	}
}

func (t *tally) add(kind string) {
	if t.kinds == nil {
		t.kinds = map[string]int{}
	}

	if _, ok := t.kinds[kind]; !ok && len(t.kinds) >= maxKinds {
		kind = otherKind
	}

	t.count++
	t.kinds[kind]++
}

// Run writes the summaries at the end of every interval until ctx ends,
// then those of the interval under way.
func (a *Aggregator) Run(ctx context.Context) {
	for {
		t := a.cfg.Clock.NewTimer(a.cfg.Interval)

		select {
		case <-ctx.Done():
			t.Stop()
			a.Flush(context.WithoutCancel(ctx))

			return
		case <-t.C():
			a.Flush(ctx)
		}
	}
}

// Flush writes the summaries of the interval so far, one per source with
// refusals not written in full, and starts a new interval.
func (a *Aggregator) Flush(ctx context.Context) {
	a.mu.Lock()
	since, sources, order, other := a.since, a.sources, a.order, a.other
	a.since, a.sources, a.order, a.other = a.cfg.Clock.Now(), map[string]*tally{}, nil, tally{}
	a.mu.Unlock()

	for _, src := range order {
		a.summarize(ctx, src, since, sources[src])
	}

	a.summarize(ctx, OtherSources, since, &other)
}

func (a *Aggregator) summarize(ctx context.Context, source string, since time.Time, t *tally) {
	if t.count == 0 {
		return
	}

	a.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, a.cfg.Summary,
		slog.String(logkey.Source, source),
		slog.Int(logkey.Count, t.count),
		slog.Any(logkey.Kinds, t.kinds),
		slog.Time(logkey.Since, since))
}
