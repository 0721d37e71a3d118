package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
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

// TestAuditHandlerCommits: a record is committed after it is written, and
// the commit's error is the record's, so that trustd withholds a
// certificate whose record did not reach the disk.
func TestAuditHandlerCommits(t *testing.T) {
	var (
		file    bytes.Buffer
		written int
	)

	errDisk := errors.New("disk gone")
	h := newAuditHandler(&file, opsLog{})
	h.commit = func() error {
		written = file.Len()

		return errDisk
	}

	rec := slog.NewRecord(time.Time{}, slog.LevelInfo, "certificate issued", 0)
	if err := h.WithAttrs([]slog.Attr{slog.String("log", "audit")}).Handle(t.Context(), rec); !errors.Is(err, errDisk) {
		t.Fatalf("Handle = %v, want the commit's error", err)
	}

	if written == 0 || written != file.Len() {
		t.Fatalf("committed at %d bytes of %d: not after the record", written, file.Len())
	}
}
