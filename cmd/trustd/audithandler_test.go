package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestAuditHandlerFormatsOnce: a record goes to the audit file and, when
// the operational log's level lets it through, the same line to the
// operational log.
func TestAuditHandlerFormatsOnce(t *testing.T) {
	for _, tt := range []struct {
		name    string
		level   slog.Level
		record  slog.Level
		wantOps bool
	}{
		{"info at info", slog.LevelInfo, slog.LevelInfo, true},
		{"info at warn", slog.LevelWarn, slog.LevelInfo, false},
		{"warn at warn", slog.LevelWarn, slog.LevelWarn, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var file, ops bytes.Buffer

			log := slog.New(newAuditHandler(&file, opsLog{w: &ops, level: tt.level})).With(slog.String("log", "audit"))
			log.Log(t.Context(), tt.record, "certificate issued", slog.String("serial", "ab"))

			if !strings.Contains(file.String(), `"log":"audit"`) || !strings.Contains(file.String(), `"serial":"ab"`) {
				t.Fatalf("audit file: %q", file.String())
			}

			if got := ops.String(); tt.wantOps != (got != "") || (tt.wantOps && got != file.String()) {
				t.Fatalf("operational log %q, audit file %q (want a copy: %v)", got, file.String(), tt.wantOps)
			}
		})
	}
}
