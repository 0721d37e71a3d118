package apid

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"sync"

	"github.com/aegis-os/aegis/authz"
)

// errRevoked refuses a client certificate whose serial the cluster's
// revocation list holds.
// It wraps authz.ErrRevoked, which the authenticator tells the caller.
var errRevoked = fmt.Errorf("apid: %w", authz.ErrRevoked)

// Revocations is the revocation list apid enforces: the serial numbers
// (lowercase hexadecimal, as big.Int.Text(16) writes them) of revoked
// client certificates. Set replaces it at any time; from then on every
// handshake and every call refuses a listed certificate, and open calls
// made with one are ended at once. The zero value revokes nothing. It is
// safe for concurrent use.
type Revocations struct {
	mu      sync.RWMutex
	serials map[string]struct{}
	changed chan struct{}
}

// Set makes serials the list. The same list again is no change: open
// calls are checked again only when the list changed.
func (r *Revocations) Set(serials []string) {
	set := make(map[string]struct{}, len(serials))
	for _, s := range serials {
		set[s] = struct{}{}
	}

	r.mu.Lock()
	defer r.mu.Unlock()

	if maps.Equal(set, r.serials) && r.serials != nil {
		return
	}

	r.serials = set

	if r.changed != nil {
		close(r.changed)
	}

	r.changed = make(chan struct{})
}

// Len is the number of serials listed.
func (r *Revocations) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()

	return len(r.serials)
}

// check refuses cert if it is listed.
func (r *Revocations) check(cert *x509.Certificate) error {
	return r.checkSerial(serialText(cert))
}

// checkSerial refuses the certificate of serial (as serialText writes it)
// if it is listed.
func (r *Revocations) checkSerial(serial string) error {
	if r == nil {
		return nil
	}

	r.mu.RLock()
	_, revoked := r.serials[serial]
	r.mu.RUnlock()

	if revoked {
		return fmt.Errorf("%w (serial %s)", errRevoked, serial)
	}

	return nil
}

// serialText is cert's serial number as the list holds it.
func serialText(cert *x509.Certificate) string {
	return cert.SerialNumber.Text(16)
}

// next returns a channel closed at the next Set.
func (r *Revocations) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()

	if r.changed == nil {
		r.changed = make(chan struct{})
	}

	return r.changed
}

// followRevocations checks every open call again as soon as the list
// changes, until ctx ends: the regular sweep runs every
// StreamRecheckInterval, too late for a revoked credential.
func (s *Server) followRevocations(ctx context.Context) {
	if s.revoked == nil {
		return
	}

	// The channel is taken before each sweep, so a change made during the
	// sweep, or before this goroutine ran at all, is not missed.
	for {
		changed := s.revoked.next()

		s.streams.recheckNow()

		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
