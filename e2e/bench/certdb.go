package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cfssl serve records every certificate it signs when it is given a
// certificate database (-db-config). The harness creates that database the
// way cfssl's own sqlite schema says: the "Up" parts of the goose
// migrations in the cfssl module (certdb/sqlite/migrations), applied in the
// order of their names by the sqlite3 shell.

// gooseUp and gooseDown open a goose migration's parts.
const (
	gooseUp   = "-- +goose Up"
	gooseDown = "-- +goose Down"
)

// upSQL is the "Up" part of one goose migration: the lines after
// "-- +goose Up" up to "-- +goose Down" or the end. A migration without
// an "Up" part is an error: it is not a goose migration.
func upSQL(migration string) (string, error) {
	var (
		b     strings.Builder
		inUp  bool
		sawUp bool
	)

	for line := range strings.Lines(migration) {
		switch strings.TrimSpace(line) {
		case gooseUp:
			inUp, sawUp = true, true

			continue
		case gooseDown:
			inUp = false

			continue
		}

		if inUp {
			b.WriteString(line)
		}
	}

	if !sawUp {
		return "", errors.New("no \"" + gooseUp + "\" part")
	}

	return b.String(), nil
}

// schemaSQL is the "Up" parts of the migrations in dir (*.sql), in the
// order of their names, as one script run in one transaction.
func schemaSQL(dir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return "", err
	}

	if len(names) == 0 {
		return "", fmt.Errorf("bench: no cfssl migrations (*.sql) in %s; give the cfssl module's certdb/sqlite/migrations", dir)
	}

	slices.Sort(names)

	var b strings.Builder

	b.WriteString("BEGIN;\n")

	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}

		up, err := upSQL(string(data))
		if err != nil {
			return "", fmt.Errorf("bench: cfssl migration %s: %w", name, err)
		}

		b.WriteString(up)
	}

	b.WriteString("COMMIT;\n")

	return b.String(), nil
}

// createCertDB creates the sqlite certificate database at dbPath from the
// migrations in dir, and writes cfssl's -db-config file naming it at
// configPath.
func createCertDB(ctx context.Context, dir, dbPath, configPath string) error {
	sql, err := schemaSQL(dir)
	if err != nil {
		return err
	}

	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		return fmt.Errorf("bench: the sqlite3 shell creates cfssl's certificate database: %w (make deps installs it)", err)
	}

	cmd := exec.CommandContext(ctx, shell, "-bail", dbPath)
	cmd.Stdin = strings.NewReader(sql)

	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out

	if err = cmd.Run(); err != nil {
		return fmt.Errorf("bench: creating cfssl's certificate database %s: %w: %s", dbPath, err, strings.TrimSpace(out.String()))
	}

	config, err := json.Marshal(map[string]string{"driver": "sqlite3", "data_source": dbPath})
	if err != nil {
		return err
	}

	return os.WriteFile(configPath, config, 0o600)
}

// checkRecorded counts the certificates in cfssl's certificate database
// and checks them against c's calls (recorded).
func (c *cfsslServer) checkRecorded(ctx context.Context) (rows, answered int64, err error) {
	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: the sqlite3 shell reads cfssl's certificate database: %w (make deps installs it)", err)
	}

	out, err := exec.CommandContext(ctx, shell, "-readonly", c.db, "SELECT COUNT(*) FROM certificates;").CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("bench: reading cfssl's certificate database %s: %w: %s", c.db, err, strings.TrimSpace(string(out)))
	}

	rows, err = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: cfssl's certificate database %s: counting its certificates: %w", c.db, err)
	}

	answered = c.answered.Load()

	if err := recorded(rows, answered, c.sent.Load()); err != nil {
		return rows, answered, fmt.Errorf("bench: cfssl's certificate database %s: %w", c.db, err)
	}

	return rows, answered, nil
}

// recorded checks that a certificate database holding rows certificates
// has one for every certificate answered, and none for a call never sent:
// the reference the harness calls durable records what it signs. A call
// cut by the end of a timed case may be committed without its answer
// being read, so rows may exceed answered, never sent.
func recorded(rows, answered, sent int64) error {
	switch {
	case rows < answered:
		return fmt.Errorf("it holds %d certificates, but %d were answered: %d not recorded", rows, answered, answered-rows)
	case rows > sent:
		return fmt.Errorf("it holds %d certificates, more than the %d calls made", rows, sent)
	}

	return nil
}
