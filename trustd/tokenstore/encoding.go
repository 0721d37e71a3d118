package tokenstore

import (
	"encoding/json"
	"fmt"
	"time"
)

// recordVersion is the encoding version written by MarshalRecord. A reader
// refuses versions it does not know rather than guess at their fields.
const recordVersion = 1

// wireRecord is the stored form of a Record. It is separate from Record so
// that renaming a Go field never changes the stored format.
type wireRecord struct {
	Version     int       `json:"v"`
	ID          string    `json:"id"`
	Salt        []byte    `json:"salt"`
	SecretHash  []byte    `json:"secretHash"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	Revoked     time.Time `json:"revoked,omitzero"`
	MaxUses     uint32    `json:"maxUses,omitempty"`
	Uses        uint32    `json:"uses,omitempty"`
	AllowedSANs []string  `json:"allowedSANs,omitempty"`
	Description string    `json:"description,omitempty"`
}

// MarshalRecord encodes r for a store backend. Times are kept in UTC.
func MarshalRecord(r Record) ([]byte, error) {
	w := wireRecord{
		Version:     recordVersion,
		ID:          r.ID,
		Salt:        r.Salt,
		SecretHash:  r.SecretHash,
		Created:     r.Created.UTC(),
		Expires:     r.Expires.UTC(),
		MaxUses:     r.MaxUses,
		Uses:        r.Uses,
		AllowedSANs: r.AllowedSANs,
		Description: r.Description,
	}

	if !r.Revoked.IsZero() {
		w.Revoked = r.Revoked.UTC()
	}

	data, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("tokenstore: encoding record: %w", err)
	}

	return data, nil
}

// UnmarshalRecord decodes what MarshalRecord wrote and validates it, so a
// corrupt entry in storage is refused rather than trusted.
func UnmarshalRecord(data []byte) (Record, error) {
	if len(data) > MaxRecordSize {
		return Record{}, fmt.Errorf("%w: stored record of %d bytes, limit %d", ErrInvalid, len(data), MaxRecordSize)
	}

	var w wireRecord
	if err := json.Unmarshal(data, &w); err != nil {
		return Record{}, fmt.Errorf("%w: decoding: %w", ErrInvalid, err)
	}

	if w.Version != recordVersion {
		return Record{}, fmt.Errorf("%w: encoding version %d, want %d", ErrInvalid, w.Version, recordVersion)
	}

	r := Record{
		ID:          w.ID,
		Salt:        w.Salt,
		SecretHash:  w.SecretHash,
		Created:     w.Created,
		Expires:     w.Expires,
		Revoked:     w.Revoked,
		MaxUses:     w.MaxUses,
		Uses:        w.Uses,
		AllowedSANs: w.AllowedSANs,
		Description: w.Description,
	}

	if err := r.Validate(); err != nil {
		return Record{}, err
	}

	return r, nil
}
