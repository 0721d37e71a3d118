package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name, epoch string
		args        []string
		bad         string
		mtime       int64
	}{
		{name: "mtime flag", args: []string{"--version", "v1.0.0", "--mtime", "5"}, mtime: 5},
		{name: "SOURCE_DATE_EPOCH", epoch: "7", args: []string{"--version", "v1.0.0"}, mtime: 7},
		{name: "flag wins", epoch: "7", args: []string{"--version", "v1.0.0", "--mtime", "5"}, mtime: 5},
		{name: "no time", args: []string{"--version", "v1.0.0"}, bad: "give --mtime or SOURCE_DATE_EPOCH"},
		{name: "no version", args: []string{"--mtime", "5"}, bad: "--version is required"},
		{name: "stray argument", args: []string{"--version", "v1.0.0", "--mtime", "5", "deb"}, bad: "unexpected arguments"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SOURCE_DATE_EPOCH", tt.epoch)

			o, err := parseFlags(tt.args, io.Discard)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err = %v, want %q", err, tt.bad)
				}

				return
			}

			if err != nil || o.mtime != tt.mtime || o.binDir != "bin" || o.out != "_out/release" {
				t.Fatalf("options %+v, %v", o, err)
			}
		})
	}
}
