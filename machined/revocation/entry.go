// Package revocation keeps the cluster's list of revoked client
// certificates: in etcd on the control planes (Store), in each node's state
// directory (List, which survives a restart and a control plane that cannot
// be reached), and on its way to workers, which run no etcd (Watcher). apid
// refuses a certificate whose serial the list holds; an entry leaves the
// list when its certificate expires. Revocation follows lineage: the Store
// also keeps which certificate each renewal was issued for (Link), and a
// revocation adds an entry for every live certificate renewed from the one
// revoked, so that the enforcing side needs no lookup beyond the list.
//
// How a revocation reaches a worker: a control plane's machined keeps one
// etcd watch on the list (Store.Follow) and hands the list, with the etcd
// revision it was read at, to its trustd; trustd keeps one copy of it per
// process (trustd.RevocationFeed), whatever the number of workers. Each
// worker holds one NodeRevocationService Watch stream on one control plane
// (Watcher), over the connection its trustdclient already keeps, naming the
// revision it has: trustd sends the whole list at once when that revision
// is older than its own (or zero: a worker just started), then again at
// every change, and nothing while the worker is current. The list is small
// (MaxEntries), so a whole list per change is simpler than a diff and
// cannot drift. A stream that breaks (a control plane stopped, killed or
// gone silent: keepalive pings find it) is opened again at once on the
// next endpoint, from the worker's revision, so a change made meanwhile
// arrives at once and nothing is sent twice; when no endpoint answers the
// worker waits (WatchBackoffMin to WatchBackoffMax) and keeps enforcing its
// list. trustd bounds its watchers (trustd.MaxRevocationWatchers, and per
// source) and keeps no queue: a slow watcher is sent the latest list when
// its previous send completes.
//
// Mid-upgrade, a control plane one minor version older answers the watch
// Unimplemented; a worker that finds no control plane serving it (or all
// full: ResourceExhausted) polls Serials every PollInterval, as before the
// watch, for WatchRetry, then asks for a watch again.
//
// No slow full poll runs beside the watch as a safety net: every stream
// starts by comparing the worker's revision with the control plane's, and
// trustd ends every stream after trustd.WatchLifetime (and at the worker's
// certificate expiry), so the comparison is made again at least that often.
// A change cannot be missed without a control plane holding a newer
// revision than the worker and not sending it, which the comparison rules
// out; a poll would only repeat it at a cost per worker.
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
