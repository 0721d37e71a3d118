// Package tokenstore keeps the bootstrap tokens trustd accepts beyond the
// machine config's own: each with an expiry, a use limit counted atomically,
// allowed SANs and a description. It stores a salted hash of each secret,
// never the secret.
//
// Store is the interface every backend implements; NewMemory is the
// in-process one, boltstore the node's default, and a store shared by the
// control planes (etcd) can implement the same interface. The storetest
// package checks any implementation against the contract.
package tokenstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aegis-os/aegis/token"
)

// Errors of the package; failures wrap one of them so callers can tell them
// apart with errors.Is.
var (
	ErrNotFound = errors.New("tokenstore: no such token")
	ErrExists   = errors.New("tokenstore: token id already in use")
	ErrFull     = errors.New("tokenstore: store holds its maximum number of tokens")
	ErrInvalid  = errors.New("tokenstore: invalid record")
	ErrExpired  = errors.New("tokenstore: token expired")
	ErrRevoked  = errors.New("tokenstore: token revoked")
	ErrUsedUp   = errors.New("tokenstore: token used up")
	// ErrUnavailable: a shared store cannot answer (etcd unreachable or
	// without quorum). Callers refuse rather than guess: stored tokens
	// fail closed while it lasts.
	ErrUnavailable = errors.New("tokenstore: the cluster's token store is unavailable (etcd unreachable or without quorum)")
)

// Store holds token records. Implementations are safe for concurrent use,
// and Use is atomic: of many concurrent uses of a token with one use left,
// exactly one succeeds.
type Store interface {
	// Create adds r. It fails with ErrExists if the id is taken, ErrFull
	// at the store's limit and ErrInvalid if r breaks Record.Validate.
	Create(ctx context.Context, r Record) error
	// Get returns the record with id, or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// List returns every record, ordered by creation time then id.
	List(ctx context.Context) ([]Record, error)
	// Revoke marks the record revoked at at and returns it. Revoking a
	// revoked record keeps the first revocation time and is not an error.
	Revoke(ctx context.Context, id string, at time.Time) (Record, error)
	// Use checks that the record is usable at now (Record.Usable) and
	// counts one use, in one atomic step, and returns the updated record.
	Use(ctx context.Context, id string, now time.Time) (Record, error)
	// Prune deletes the records that ended (expired or were revoked)
	// before endedBefore and returns how many it deleted.
	Prune(ctx context.Context, endedBefore time.Time) (int, error)
}

// Record is one stored token. It never holds the secret.
type Record struct {
	// ID is the public half of the token, the record's key.
	ID string
	// Salt and SecretHash verify a presented secret (MatchesSecret).
	Salt       []byte
	SecretHash []byte
	// Created and Expires bound the token's life; Expires is required.
	Created time.Time
	Expires time.Time
	// Revoked is when the token was revoked; zero while it is not.
	Revoked time.Time
	// MaxUses is how many certificates the token may obtain; 0 means no
	// limit and 1 single-use. Uses counts the certificates obtained.
	MaxUses uint32
	Uses    uint32
	// AllowedSANs are sanpolicy patterns, as the operator gave them after
	// canonicalization; empty means no restriction.
	AllowedSANs []string
	// Description is the operator's note.
	Description string
}

// Validate checks the record's shape before it is stored.
func (r *Record) Validate() error {
	switch {
	case !token.ValidID(r.ID):
		return fmt.Errorf("%w: id is not of the token id form", ErrInvalid)
	case len(r.Salt) != SaltSize || len(r.SecretHash) != hashSize:
		return fmt.Errorf("%w: salt or secret hash has the wrong size", ErrInvalid)
	case r.Created.IsZero() || !r.Expires.After(r.Created):
		return fmt.Errorf("%w: expiry must follow creation", ErrInvalid)
	case r.Uses > r.MaxUses && r.MaxUses != 0:
		return fmt.Errorf("%w: %d uses of %d", ErrInvalid, r.Uses, r.MaxUses)
	case len(r.AllowedSANs) > MaxAllowedSANs:
		return fmt.Errorf("%w: %d allowed SANs, limit %d", ErrInvalid, len(r.AllowedSANs), MaxAllowedSANs)
	case len(r.Description) > MaxDescriptionLength:
		return fmt.Errorf("%w: description of %d bytes, limit %d", ErrInvalid, len(r.Description), MaxDescriptionLength)
	}

	return nil
}

// Usable returns nil if the token may obtain a certificate at now, or why not.
func (r *Record) Usable(now time.Time) error {
	switch {
	case !r.Revoked.IsZero():
		return ErrRevoked
	case !now.Before(r.Expires):
		return ErrExpired
	case r.MaxUses != 0 && r.Uses >= r.MaxUses:
		return ErrUsedUp
	}

	return nil
}

// RevokeAt marks the record revoked at at, keeping an earlier revocation:
// the change every store's Revoke makes, under its own atomicity.
func (r *Record) RevokeAt(at time.Time) error {
	if r.Revoked.IsZero() {
		r.Revoked = at
	}

	return nil
}

// UseAt counts one use if the record is usable at now (Usable): the change
// every store's Use makes, under its own atomicity.
func (r *Record) UseAt(now time.Time) error {
	if err := r.Usable(now); err != nil {
		return err
	}

	r.Uses++

	return nil
}

// Ended returns when the token stopped being usable by time alone: its
// revocation, else its expiry.
func (r *Record) Ended() time.Time {
	if !r.Revoked.IsZero() && r.Revoked.Before(r.Expires) {
		return r.Revoked
	}

	return r.Expires
}

// Clone returns a deep copy, so that a store never shares its slices with a
// caller.
func (r Record) Clone() Record {
	r.Salt = slices.Clone(r.Salt)
	r.SecretHash = slices.Clone(r.SecretHash)
	r.AllowedSANs = slices.Clone(r.AllowedSANs)

	return r
}

// SortRecords orders records as List returns them.
func SortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}

		if a.ID < b.ID {
			return -1
		}

		if a.ID > b.ID {
			return 1
		}

		return 0
	})
}
