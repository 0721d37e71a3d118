package daemonflag

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestLogLevel(t *testing.T) {
	tests := []struct {
		arg  string
		want slog.Level
		bad  bool
	}{
		{arg: "debug", want: slog.LevelDebug},
		{arg: "info", want: slog.LevelInfo},
		{arg: "WARN", want: slog.LevelWarn},
		{arg: "error", want: slog.LevelError},
		{arg: "verbose", bad: true},
		{arg: "info+2", bad: true},
		{arg: "", bad: true},
	}

	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			var f Flags

			fs := flag.NewFlagSet("d", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)

			err := fs.Parse([]string{"--log-level", tt.arg})
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), "use debug, info, warn or error") || !strings.Contains(err.Error(), "-log-level") {
					t.Fatalf("err = %v", err)
				}

				return
			}

			if err != nil || f.Level != tt.want {
				t.Fatalf("level = %v, %v; want %v", f.Level, err, tt.want)
			}

			if LevelName(f.Level) != strings.ToLower(tt.arg) {
				t.Fatalf("LevelName = %q", LevelName(f.Level))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	var f Flags

	fs := flag.NewFlagSet("d", flag.ContinueOnError)
	f.Register(fs)

	if err := fs.Parse(nil); err != nil || f.Version || f.Level != slog.LevelInfo {
		t.Fatalf("defaults = %+v, %v", f, err)
	}

	var out bytes.Buffer

	PrintVersion(&out, "trustd")

	if !strings.HasPrefix(out.String(), "trustd v") || !strings.HasSuffix(out.String(), ")\n") {
		t.Fatalf("version line = %q", out.String())
	}
}

func TestMetricsListen(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		bad  bool
	}{
		{args: nil, want: ""},
		{args: []string{"--metrics-listen", "127.0.0.2:9102"}, want: "127.0.0.2:9102"},
		{args: []string{"--metrics-listen", ":9101"}, want: ":9101"},
		{args: []string{"--metrics-listen", "9101"}, bad: true},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var f Flags

			fs := flag.NewFlagSet("d", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)

			err := fs.Parse(tt.args)
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), "-metrics-listen") {
					t.Fatalf("err = %v", err)
				}

				return
			}

			if err != nil || f.MetricsListen != tt.want {
				t.Fatalf("MetricsListen = %q, err = %v; want %q", f.MetricsListen, err, tt.want)
			}
		})
	}
}
