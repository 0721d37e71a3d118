// Package rotation keeps the state of a CA rotation in the cluster's etcd,
// where every control plane sees it, and serves it (with the node's
// re-issue of its certificates) as aegis.rotation.RotationService.
package rotation

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// Errors the server maps to gRPC codes.
var (
	// ErrNoEtcd: the node runs no etcd (a worker, or a control plane
	// before its etcd runs).
	ErrNoEtcd = errors.New("rotation: the rotation state is kept in etcd, which runs on control-plane nodes; use a control-plane endpoint")
	// ErrUnavailable: etcd did not answer (no quorum).
	ErrUnavailable = errors.New("rotation: the cluster state in etcd is unavailable")
	// ErrConflict: the record changed since the caller read it.
	ErrConflict = errors.New("rotation: the rotation state changed since it was read (another rotation running?); read it again")
	// ErrBadRecord: the record to put is malformed.
	ErrBadRecord = errors.New("rotation: bad rotation record")
)

// Check validates a record before it is stored: a known kind and step, and
// CA certificates only: a record never holds a private key.
func Check(r *rotation.Rotation, now time.Time) error {
	if r == nil {
		return fmt.Errorf("%w: rotation: required", ErrBadRecord)
	}

	if !slices.Contains(rotationstate.Kinds(), r.GetCa()) {
		return fmt.Errorf("%w: ca: %q is not one of %v", ErrBadRecord, r.GetCa(), rotationstate.Kinds())
	}

	if r.GetStep() < rotationstate.StepRolledBack || r.GetStep() > rotationstate.StepDone {
		return fmt.Errorf("%w: step: %d outside [%d, %d]", ErrBadRecord, r.GetStep(), rotationstate.StepRolledBack, rotationstate.StepDone)
	}

	for _, f := range []struct {
		name string
		pem  []byte
	}{{"old_ca", r.GetOldCa()}, {"new_ca", r.GetNewCa()}} {
		if bytes.Contains(f.pem, []byte("PRIVATE KEY")) {
			return fmt.Errorf("%w: %s: holds a private key; the record is for certificates only", ErrBadRecord, f.name)
		}

		certs, err := ca.ParseCertificates(f.pem)
		if err == nil && len(certs) != 1 {
			err = fmt.Errorf("%d certificates, want one", len(certs))
		}

		if err == nil {
			err = ca.CheckCACertificate(certs[0], now)
		}

		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadRecord, f.name, err)
		}
	}

	if len(r.GetStartedBy()) > MaxStartedBy {
		return fmt.Errorf("%w: started_by: %d bytes, limit %d", ErrBadRecord, len(r.GetStartedBy()), MaxStartedBy)
	}

	return nil
}
