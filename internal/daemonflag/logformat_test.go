package daemonflag

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLogFormat(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// check inspects the line that "msg" with retry_in=28s became.
		check func(t *testing.T, line string)
		bad   bool
	}{
		{name: "default json", check: isJSON},
		{name: "json", args: []string{"--log-format", "json"}, check: isJSON},
		{name: "text", args: []string{"--log-format", "TEXT"}, check: isText},
		{name: "unknown", args: []string{"--log-format", "logfmt"}, bad: true},
		{name: "empty", args: []string{"--log-format", ""}, bad: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Flags

			fs := flag.NewFlagSet("d", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)

			err := fs.Parse(tt.args)
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), "use json or text") || !strings.Contains(err.Error(), "-log-format") {
					t.Fatalf("err = %v", err)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			var out bytes.Buffer

			slog.New(f.Handler(&out)).Info("msg", slog.Duration("retry_in", 28*time.Second))
			tt.check(t, strings.TrimSpace(out.String()))

			// The daemons started with PassOn's arguments parse them
			// back to the same flags.
			var g Flags

			gs := flag.NewFlagSet("child", flag.ContinueOnError)
			g.Register(gs)

			if err := gs.Parse(f.PassOn()); err != nil || g.Format.String() != f.Format.String() || g.Level != f.Level {
				t.Fatalf("PassOn %q parsed to %+v, %v; want %+v", f.PassOn(), g, err, f)
			}
		})
	}
}

// TestJSONHandler: JSONHandler stays JSON under --log-format text.
func TestJSONHandler(t *testing.T) {
	f := Flags{Format: FormatText, Level: slog.LevelWarn}

	var out bytes.Buffer

	log := slog.New(f.JSONHandler(&out))
	log.Info("below the level")
	log.Warn("msg", slog.Duration("retry_in", 28*time.Second))
	isJSON(t, strings.TrimSpace(out.String()))

	if !slices.Contains(f.PassOn(), "text") || !slices.Contains(f.PassOn(), "warn") {
		t.Fatalf("PassOn = %q", f.PassOn())
	}
}

func isJSON(t *testing.T, line string) {
	t.Helper()

	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("not one JSON line: %q: %v", line, err)
	}

	if rec["msg"] != "msg" || rec["retry_in"] != "28s" {
		t.Fatalf("record = %v", rec)
	}
}

func isText(t *testing.T, line string) {
	t.Helper()

	if strings.HasPrefix(line, "{") || !strings.Contains(line, " level=INFO msg=msg retry_in=28s") {
		t.Fatalf("not a text line: %q", line)
	}
}

// TestLevelUnchanged: the level a line is written with is the one slog
// writes without DurationsAsText, in both formats, for levels between the
// named ones too; a level-valued field other than the record's is left to
// slog.
func TestLevelUnchanged(t *testing.T) {
	for _, lvl := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelError + 4} {
		for name, newHandler := range map[string]func(io.Writer, *slog.HandlerOptions) slog.Handler{
			"json": func(w io.Writer, o *slog.HandlerOptions) slog.Handler { return slog.NewJSONHandler(w, o) },
			"text": func(w io.Writer, o *slog.HandlerOptions) slog.Handler { return slog.NewTextHandler(w, o) },
		} {
			var plain, replaced bytes.Buffer

			at := time.Unix(0, 0)
			for w, opts := range map[*bytes.Buffer]*slog.HandlerOptions{
				&plain:    {Level: slog.LevelDebug},
				&replaced: {Level: slog.LevelDebug, ReplaceAttr: DurationsAsText},
			} {
				r := slog.NewRecord(at, lvl, "msg", 0)
				r.AddAttrs(slog.Any("threshold", slog.LevelWarn))

				if err := newHandler(w, opts).Handle(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}

			if plain.String() != replaced.String() {
				t.Errorf("%s, %v: %q, want %q", name, lvl, replaced.String(), plain.String())
			}
		}
	}
}
