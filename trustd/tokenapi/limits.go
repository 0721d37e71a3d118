package tokenapi

import "time"

// Defaults and bounds of the token service, in one place.
const (
	// DefaultTTL is a token's lifetime when the request names none: a day,
	// as kubeadm's bootstrap tokens, long enough to boot a batch of nodes.
	DefaultTTL = 24 * time.Hour

	// MaxTTL bounds a token's lifetime. A token that must outlive a month
	// is the machine config's static token by another name.
	MaxTTL = 30 * 24 * time.Hour

	// MinTTL is the shortest lifetime: below a second, a token expires
	// before a node could use it.
	MinTTL = time.Second

	// DefaultRetention is how long an expired or revoked token stays
	// listed, for the audit trail, before Create prunes it.
	DefaultRetention = 7 * 24 * time.Hour

	// createAttempts bounds the retries when a new token's random id is
	// already taken; with 36^6 ids and at most a thousand records, a second
	// clash in a row means the randomness is broken.
	createAttempts = 3
)
