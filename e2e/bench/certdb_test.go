package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpSQL(t *testing.T) {
	for _, tt := range []struct {
		name, migration, want string
		fails                 bool
	}{
		{"up and down", "-- +goose Up\nCREATE TABLE a (x int);\n\n-- +goose Down\nDROP TABLE a;\n", "CREATE TABLE a (x int);\n\n", false},
		{"up only, no newline at the end", "-- +goose Up\nALTER TABLE a ADD COLUMN y;", "ALTER TABLE a ADD COLUMN y;", false},
		{"comment before up", "-- a note\n-- +goose Up\nSELECT 1;\n", "SELECT 1;\n", false},
		{"marker with spaces around", "  -- +goose Up  \nSELECT 1;\n -- +goose Down\nSELECT 2;\n", "SELECT 1;\n", false},
		{"down only", "-- +goose Down\nDROP TABLE a;\n", "", true},
		{"plain SQL", "CREATE TABLE a (x int);\n", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := upSQL(tt.migration)
			if (err != nil) != tt.fails || got != tt.want {
				t.Fatalf("upSQL = %q, %v; want %q, fails %v", got, err, tt.want, tt.fails)
			}
		})
	}
}

// TestSchemaSQL: the "Up" parts in the order of the files' names, in one
// transaction; files other than *.sql are left alone.
func TestSchemaSQL(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"002_add.sql":    "-- +goose Up\nALTER TABLE a ADD COLUMN y;\n-- +goose Down\n",
		"001_create.sql": "-- +goose Up\nCREATE TABLE a (x int);\n-- +goose Down\nDROP TABLE a;\n",
		"dbconf.yml":     "not SQL",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	got, err := schemaSQL(dir)
	if err != nil {
		t.Fatal(err)
	}

	if want := "BEGIN;\nCREATE TABLE a (x int);\nALTER TABLE a ADD COLUMN y;\nCOMMIT;\n"; got != want {
		t.Fatalf("schemaSQL = %q, want %q", got, want)
	}

	if _, err := schemaSQL(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no cfssl migrations") {
		t.Fatalf("an empty directory: %v", err)
	}
}

// TestRecorded: a certificate database must hold every certificate
// answered, and no more than the calls made.
func TestRecorded(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		rows, answered, sent int64
		fails                bool
	}{
		{"one per answer", 100, 100, 100, false},
		{"a call cut after its commit", 101, 100, 102, false},
		{"an answer not recorded", 99, 100, 100, true},
		{"more rows than calls", 103, 100, 102, true},
		{"nothing", 0, 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := recorded(tt.rows, tt.answered, tt.sent); (err != nil) != tt.fails {
				t.Fatalf("recorded(%d, %d, %d) = %v, want fails %v", tt.rows, tt.answered, tt.sent, err, tt.fails)
			}
		})
	}
}
