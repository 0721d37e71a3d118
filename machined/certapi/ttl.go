package certapi

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// CheckTTL reads a lifetime a caller asked for in the request field named
// field: nil or zero means none asked (zero returned), a malformed duration
// or one shorter than MinTTL is an error naming the field. Both
// GenerateClientConfiguration and Renew take lifetimes through it, so a bad
// one is the caller's mistake (InvalidArgument) and never reaches the
// signer, whose re-check would call it a failure of the node.
func CheckTTL(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}

	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}

	switch ttl := d.AsDuration(); {
	case ttl == 0:
		return 0, nil
	case ttl < MinTTL:
		return 0, fmt.Errorf("%s %s is shorter than %s", field, ttl, MinTTL)
	default:
		return ttl, nil
	}
}
