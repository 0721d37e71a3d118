// Package revocation keeps the cluster's list of revoked client
// certificates: in etcd on the control planes (Store), in each node's state
// directory (List, which survives a restart and a control plane that cannot
// be reached), and on its way to workers, which run no etcd (Poller). apid
// refuses a certificate whose serial the list holds; an entry leaves the
// list when its certificate expires. Revocation follows lineage: the Store
// also keeps which certificate each renewal was issued for (Link), and a
// revocation adds an entry for every live certificate renewed from the one
// revoked, so that the enforcing side needs no lookup beyond the list.
package revocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aegis-os/aegis/client/serial"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors of the package; Server maps them to gRPC codes.
var (
	// ErrUnavailable: etcd did not answer (no quorum, unreachable). The
	// revocation fails closed: nothing is recorded.
	ErrUnavailable = errors.New("revocation: the cluster state in etcd is unavailable")
	// ErrFull: the list holds MaxEntries revocations of certificates not
	// yet expired.
	ErrFull = errors.New("revocation: the revocation list is full")
	// ErrBadEntry: a serial, expiry or reason that cannot be recorded.
	ErrBadEntry = errors.New("revocation: bad revocation")
)

// Entry is one revoked certificate.
type Entry struct {
	// Serial is the certificate's serial number in lowercase hexadecimal,
	// without leading zeros (big.Int.Text(16)).
	Serial string `json:"serial"`
	// NotAfter is the certificate's expiry; the entry leaves the list then.
	NotAfter  time.Time `json:"not_after"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// RevokedBy is the subject of the certificate that made the revoke call.
	RevokedBy string `json:"revoked_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Expired reports whether the entry's certificate has expired at now: it
// is valid through its NotAfter.
func (e Entry) Expired(now time.Time) bool { return now.After(e.NotAfter) }

// ParseSerial reads a serial as an operator writes it (serial.Parse), its
// refusals wrapped in ErrBadEntry.
func ParseSerial(s string) (string, error) {
	canonical, err := serial.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadEntry, err)
	}

	return canonical, nil
}

// check refuses an entry that cannot be recorded.
func (e Entry) check() error {
	if s, err := ParseSerial(e.Serial); err != nil {
		return err
	} else if s != e.Serial {
		return fmt.Errorf("%w: serial %q is not in canonical form", ErrBadEntry, e.Serial)
	}

	switch {
	case e.NotAfter.IsZero():
		return fmt.Errorf("%w: serial %s: no expiry", ErrBadEntry, e.Serial)
	case len(e.Reason) > MaxReason:
		return fmt.Errorf("%w: reason longer than %d bytes", ErrBadEntry, MaxReason)
	case !utf8.ValidString(e.Reason) || strings.ContainsAny(e.Reason, "\r\n\x00"):
		return fmt.Errorf("%w: reason must be one line of UTF-8 text", ErrBadEntry)
	}

	return nil
}

func marshalEntry(e Entry) ([]byte, error) { return json.Marshal(e) }

func unmarshalEntry(data []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}

	return e, e.check()
}
