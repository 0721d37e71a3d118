package certapi

import "time"

// Limits of the certificate service, in one place.
const (
	// DefaultMaxTTL is the longest lifetime a renewed client certificate
	// gets unless Config.MaxTTL lowers it: the client profile's maximum,
	// one year, the bound GenerateClientConfiguration's certificates have,
	// so renewing never grants more than issuing does. (A test keeps it
	// equal to ca.DefaultsFor(ca.ProfileClient).MaxTTL.)
	DefaultMaxTTL = 365 * 24 * time.Hour

	// MinTTL is the shortest lifetime a caller may ask for: a certificate
	// that expires before its holder could use it is a mistake.
	MinTTL = time.Second
)
