// Package membership keeps the list of the cluster's nodes in etcd: each
// node writes its own entry (hostname, addresses, role, version, time sync,
// accepted CAs) every interval, and an entry not refreshed for
// AgeOutIntervals intervals is dropped by an etcd lease. Control planes
// write through their etcd client; workers, which run no etcd, send a
// heartbeat to a control plane's trustd, authenticated by their node
// certificate (Server), which holds the entry for as long as the
// connection it came on stays open (hold.go): the worker then sends none
// until its entry or that connection changes (Sender). Readers use the
// Reader interface.
//
// The server also answers which nodes hold live certificates of the
// cluster (Certified, from a record the assembly gives it), so that a
// cluster-wide procedure knows every node before it changes anything, and
// takes a worker that is gone out of the list and that record (Remove).
package membership

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/ca"
)

// Roles of a member.
const (
	RoleControlPlane = "controlplane"
	RoleWorker       = "worker"
)

// Member is one entry of the list.
type Member = membership.Member

// Reader lists the cluster's live members, sorted by hostname. *Store is
// one; so is a view that a resource API serves from.
type Reader interface {
	List(ctx context.Context) ([]*Member, error)
}

// Errors of membership; servers map them to gRPC codes.
var (
	// ErrInvalid: the entry is malformed.
	ErrInvalid = errors.New("membership: invalid entry")
	// ErrNotOwner: the caller's certificate does not name the entry's
	// hostname or addresses, or a worker claimed a control plane's entry
	// or name.
	ErrNotOwner = errors.New("membership: entry not owned by the caller")
	// ErrUnavailable: etcd did not answer (no quorum, not running).
	ErrUnavailable = errors.New("membership: etcd unavailable")
	// ErrConflict: the entry changed while it was written; the next
	// heartbeat writes it again.
	ErrConflict = errors.New("membership: entry changed concurrently")
	// ErrNoEtcd: the node runs no etcd (a worker, or a control plane whose
	// etcd is not set up), where the nodes that hold certificates are
	// known.
	ErrNoEtcd = errors.New("membership: the nodes that hold certificates are kept in etcd, which runs on control-plane nodes; " +
		"use a control-plane endpoint")
	// ErrControlPlane: Remove was asked to take out a control plane,
	// which leaves through etcd's member removal.
	ErrControlPlane = errors.New("membership: a control plane is not removed here")
	// ErrAlive: Remove was asked to take out a node that is not gone: its
	// entry is not aged out.
	ErrAlive = errors.New("membership: the node is alive")
	// ErrFull: the member list holds as many entries as it admits; a new
	// node is not listed until one leaves.
	ErrFull = errors.New("membership: the member list is full")
	// ErrNotFound: no node of that hostname or address holds a
	// certificate or an entry.
	ErrNotFound = errors.New("membership: no such node")
)

// Check validates an entry as a node sends it: a DNS hostname, one to
// MaxAddresses canonical IP addresses, an interval within bounds.
func Check(m *Member) error {
	if m == nil {
		return fmt.Errorf("%w: no entry", ErrInvalid)
	}

	if err := ca.CheckDNSName(m.GetHostname()); err != nil {
		return fmt.Errorf("%w: hostname %q: %v", ErrInvalid, m.GetHostname(), err)
	}

	if h := m.GetHostname(); h != ca.CanonicalName(h) {
		return fmt.Errorf("%w: hostname %q is not in canonical form %q", ErrInvalid, h, ca.CanonicalName(h))
	}

	if n := len(m.GetAddresses()); n == 0 || n > MaxAddresses {
		return fmt.Errorf("%w: %d addresses, want 1 to %d", ErrInvalid, n, MaxAddresses)
	}

	for _, a := range m.GetAddresses() {
		if err := CheckAddress(a); err != nil {
			return err
		}
	}

	if len(m.GetVersion()) > MaxVersionLength || strings.ContainsFunc(m.GetVersion(), func(r rune) bool { return r < ' ' || r > '~' }) {
		return fmt.Errorf("%w: version of %d bytes or not printable", ErrInvalid, len(m.GetVersion()))
	}

	if d := m.GetInterval().AsDuration(); d < MinInterval || d > MaxInterval {
		return fmt.Errorf("%w: interval %s outside [%s, %s]", ErrInvalid, d, MinInterval, MaxInterval)
	}

	if h := m.GetAcceptedCas(); h != "" {
		if _, err := hex.DecodeString(h); err != nil || len(h) != 2*sha256.Size {
			return fmt.Errorf("%w: accepted CAs digest %q", ErrInvalid, h)
		}
	}

	return nil
}

// CheckAddress checks that a is an address an entry may have: a canonical
// IP address, neither unspecified nor multicast, without a zone.
func CheckAddress(a string) error {
	addr, err := netip.ParseAddr(a)
	if err != nil || addr.Unmap().String() != a || addr.Zone() != "" || addr.IsUnspecified() || addr.IsMulticast() {
		return fmt.Errorf("%w: address %q is not a canonical IP address", ErrInvalid, a)
	}

	return nil
}

// CheckOwner checks that cert, the caller's verified node certificate,
// names the entry's hostname (as a DNS name) and every address of the
// entry: only the node itself writes it, and a name is the node's only
// when its certificate proves it. An entry without a hostname (Leave's)
// is checked for its addresses alone.
func CheckOwner(cert *x509.Certificate, m *Member) error {
	if h := m.GetHostname(); h != "" && !slices.ContainsFunc(cert.DNSNames, func(n string) bool { return ca.CanonicalName(n) == h }) {
		return fmt.Errorf("%w: the certificate does not name hostname %s (a node's certificate must carry its name; "+
			"a node renews or re-joins to get one)", ErrNotOwner, h)
	}

	for _, a := range m.GetAddresses() {
		addr := netip.MustParseAddr(a)

		if !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool {
			got, ok := netip.AddrFromSlice(ip)

			return ok && got.Unmap() == addr
		}) {
			return fmt.Errorf("%w: the certificate does not name address %s", ErrNotOwner, a)
		}
	}

	return nil
}

// Stale reports whether m, as read at now, belongs to a node that stopped
// its heartbeats. The entry's lease ends it AgeOut after the last one;
// last_seen, written at least every LastSeenRefresh while the node beats,
// is the check that does not depend on etcd's lease expiry (which a
// leader election postpones): past both, the entry is not believed.
func Stale(m *Member, now time.Time) bool {
	return now.Sub(m.GetLastSeen().AsTime()) > StaleAfter(m.GetInterval().AsDuration())
}

// CADigest is the accepted-CA digest of a PEM bundle: SHA-256 over the
// sorted DER certificates, hex.
func CADigest(set *ca.AcceptedSet) string {
	if set == nil {
		return ""
	}

	var ders [][]byte
	for _, c := range set.Certificates() {
		ders = append(ders, c.Raw)
	}

	slices.SortFunc(ders, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })

	h := sha256.New()
	for _, d := range ders {
		h.Write(d)
	}

	return hex.EncodeToString(h.Sum(nil))
}
