// Package daemonflag holds the flags every Aegis daemon (machined, apid,
// trustd) shares, so they are spelled, checked and reported alike:
// --version, --log-level, --log-format and --metrics-listen.
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
	// Format is the --log-format; the zero value is FormatJSON.
	Format LogFormat
	// MetricsListen is the --metrics-listen address of the Prometheus
	// endpoint; empty (the default) serves no metrics.
	MetricsListen string
}

// Register adds --version, --log-level, --log-format and --metrics-listen
// to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&f.Version, "version", false, "print the version and exit")
	fs.Var((*level)(&f.Level), "log-level", "least severe `LEVEL` logged: debug, info, warn or error")
	fs.Var(&f.Format, "log-format", "`FORMAT` of log lines: json (one object a line) or text (key=value)")
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

// Handler is the log handler of a daemon at the flags' level, in the
// flags' format.
func (f *Flags) Handler(w io.Writer) slog.Handler {
	if f.Format == FormatText {
		return slog.NewTextHandler(w, f.handlerOptions())
	}

	return f.JSONHandler(w)
}

// JSONHandler is a JSON log handler at the flags' level whatever the
// --log-format: for logs that programs read back, such as machined's own
// log file under the node's state directory.
func (f *Flags) JSONHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, f.handlerOptions())
}

func (f *Flags) handlerOptions() *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: f.Level, ReplaceAttr: DurationsAsText}
}

// PassOn is the --log-level and --log-format of a daemon's flags, as
// arguments for the daemons it starts, so they log alike.
func (f *Flags) PassOn() []string {
	return []string{"--log-level", LevelName(f.Level), "--log-format", f.Format.String()}
}

// DurationsAsText writes a duration as Go spells it ("28.07s", "1h0m0s")
// rather than as slog's JSON does, a count of nanoseconds that a person
// reading a log line has to divide. Every JSON handler of the daemons
// (their logs and trustd's audit log) replaces attributes with it.
//
// It also hands the record's level back as the string it is written as:
// with a ReplaceAttr set, slog passes the level to it as a value of any
// kind, which the JSON handler then writes through encoding/json, once per
// line (a tenth of the cost of apid's request log line).
func DurationsAsText(groups []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	case slog.KindAny:
		if l, ok := a.Value.Any().(slog.Level); ok && len(groups) == 0 && a.Key == slog.LevelKey {
			return slog.String(a.Key, l.String())
		}
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

// LogFormat is how a daemon writes its log lines: a flag.Value.
type LogFormat string

// The formats --log-format accepts.
const (
	// FormatJSON is one JSON object a line, what log collectors parse;
	// the default, and the only format before --log-format existed.
	FormatJSON LogFormat = "json"
	// FormatText is slog's key=value lines, for a person reading a
	// terminal or the journal.
	FormatText LogFormat = "text"
)

// String is the format's name; the zero value is json.
func (l *LogFormat) String() string {
	if l == nil || *l == "" {
		return string(FormatJSON)
	}

	return string(*l)
}

// Set accepts json or text.
func (l *LogFormat) Set(s string) error {
	switch v := LogFormat(strings.ToLower(strings.TrimSpace(s))); v {
	case FormatJSON, FormatText:
		*l = v

		return nil
	default:
		return fmt.Errorf("unknown log format %q: use json or text", s)
	}
}
