package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
)

// writeFile writes data atomically; an existing file is an error naming the
// way out unless force is set.
func writeFile(path string, data []byte, perm fs.FileMode, force bool) error {
	err := atomicfile.Write(path, data, perm, atomicfile.Options{Overwrite: force, DirPerm: 0o755})
	if errors.Is(err, atomicfile.ErrExists) {
		return fmt.Errorf("%s already exists; use --force to replace it", path)
	}

	return err
}

// refuseExisting fails if any of paths exists, so a command that writes
// several files checks them all before writing the first.
func refuseExisting(force bool, paths ...string) error {
	if force {
		return nil
	}

	var taken []string

	for _, p := range paths {
		if fileExists(p) {
			taken = append(taken, p)
		}
	}

	switch len(taken) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s already exists; use --force to replace it", taken[0])
	default:
		return fmt.Errorf("%s already exist; use --force to replace them", strings.Join(taken, ", "))
	}
}

// certTable prints one row per certificate: what it is, its subject, key,
// expiry and fingerprint.
type certTable struct {
	tw  *tabwriter.Writer
	now time.Time
}

func newCertTable(w io.Writer, now time.Time) *certTable {
	t := &certTable{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0), now: now}
	fmt.Fprintln(t.tw, "  WHAT\tSUBJECT\tKEY\tEXPIRES\tFINGERPRINT")

	return t
}

func (t *certTable) add(what string, cert *x509.Certificate) {
	fmt.Fprintf(t.tw, "  %s\t%s\t%s\t%s\t%s\n", what, subjectOf(cert), ca.DescribeKey(cert.PublicKey), expiry(cert, t.now), ca.Fingerprint(cert))
}

func (t *certTable) flush() { t.tw.Flush() } //nolint:errcheck // writes to a terminal or buffer

func subjectOf(cert *x509.Certificate) string {
	if s := cert.Subject.String(); s != "" {
		return s
	}

	return "(empty)"
}

// expiry renders NotAfter with the time left, e.g. "2036-11-19 (in 3649d)";
// within the hour to the second, as short-lived certificates need.
func expiry(cert *x509.Certificate, now time.Time) string {
	left := cert.NotAfter.Sub(now)
	date := cert.NotAfter.UTC().Format("2006-01-02 15:04 MST")

	switch {
	case left <= 0:
		return date + " (EXPIRED)"
	case left < time.Hour:
		return fmt.Sprintf("%s (in %s)", date, left.Round(time.Second))
	case left < 48*time.Hour:
		return fmt.Sprintf("%s (in %s)", date, left.Round(time.Minute))
	default:
		return fmt.Sprintf("%s (in %dd)", date, int(left.Hours()/24))
	}
}
