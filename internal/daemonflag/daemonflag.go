// Package daemonflag holds the flags every Aegis daemon (machined, apid,
// trustd) shares, so they are spelled, checked and reported alike:
// --version, --log-level and --metrics-listen.
package daemonflag

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/aegis-os/aegis/internal/version"
)

// Flags are the shared flags of one daemon's command line.
type Flags struct {
	// Version is set by --version: print the version and exit.
	Version bool
	// Level is the --log-level, info by default.
	Level slog.Level
	// MetricsListen is the --metrics-listen address of the Prometheus
	// endpoint; empty (the default) serves no metrics.
	MetricsListen string
}

// Register adds --version, --log-level and --metrics-listen to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&f.Version, "version", false, "print the version and exit")
	fs.Var((*level)(&f.Level), "log-level", "least severe `LEVEL` logged: debug, info, warn or error")
	fs.Func("metrics-listen", "serve Prometheus metrics at http://`ADDR`/metrics (host:port); off by default", func(s string) error {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("not host:port: %w", err)
		}

		f.MetricsListen = s

		return nil
	})
}

// PrintVersion writes the --version line of program to w.
func PrintVersion(w io.Writer, program string) {
	fmt.Fprintln(w, version.Line(program))
}

// Handler is the JSON log handler of a daemon at the flags' level.
func (f *Flags) Handler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: f.Level, ReplaceAttr: DurationsAsText})
}

// DurationsAsText writes a duration as Go spells it ("28.07s", "1h0m0s")
// rather than as slog's JSON does, a count of nanoseconds that a person
// reading a log line has to divide. Every JSON handler of the daemons
// (their logs and trustd's audit log) replaces attributes with it.
func DurationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}

	return a
}

// LevelName is the --log-level value of lvl, to pass a daemon's level on to
// the daemons it starts.
func LevelName(lvl slog.Level) string { return strings.ToLower(lvl.String()) }

// levels are the accepted --log-level values. slog's own parser also takes
// offsets such as "info+2"; a flag takes only the four names.
var levels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// level is a slog.Level as a flag.Value.
type level slog.Level

func (l *level) String() string { return LevelName(slog.Level(*l)) }

func (l *level) Set(s string) error {
	v, ok := levels[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return fmt.Errorf("unknown log level %q: use debug, info, warn or error", s)
	}

	*l = level(v)

	return nil
}
