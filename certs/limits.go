package certs

import "time"

// Limits of the machine config's previous static tokens.
const (
	// MaxPreviousTokens bounds machine.previousTokens: a rotation adds one
	// entry, and trustd compares every entry on each join, so a list that
	// grows rotation after rotation would slow every join and keep old
	// credentials alive for nothing.
	MaxPreviousTokens = 8
	// MaxPreviousTokenLife bounds how far ahead a previous token may
	// expire: the overlap covers a rotation's rollout, and a token an
	// operator rotated away from must not stay accepted for months.
	MaxPreviousTokenLife = 7 * 24 * time.Hour
)
