package sanpolicy

import "github.com/aegis-os/aegis/ca"

// Limits of a SAN policy, in one place.
const (
	// MaxPatterns bounds the patterns of one policy. A certificate carries
	// at most ca.MaxSANs names, so more patterns than that only cost time on
	// every request the token is used for.
	MaxPatterns = ca.MaxSANs

	// MaxPatternLength bounds one pattern: the longest DNS name, which is
	// also longer than any IPv6 CIDR.
	MaxPatternLength = ca.MaxDNSNameLength
)
