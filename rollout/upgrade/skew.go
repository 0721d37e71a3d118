package upgrade

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// ErrSkew refuses a target outside the skew policy for a node's running
// version.
var ErrSkew = errors.New("outside the supported version skew")

// WithinSkew is the skew policy a plan is checked against when Options
// leave Skew nil: a node on running may go to target when both are "v"
// and semver, of the same major, and target is the same minor (a later or
// equal patch, or another build of the same version) or the next one. A
// lower version is refused: going back is a rollback to the version the
// node kept, not an upgrade. Nodes one minor apart interoperate, so a
// cluster half way through such an upgrade works.
func WithinSkew(running, target string) error {
	from, err := parseVersion(running)
	if err != nil {
		return err
	}

	to, err := parseVersion(target)
	if err != nil {
		return err
	}

	switch {
	case to.Major != from.Major:
		return fmt.Errorf("%w: %s to %s crosses a major version", ErrSkew, running, target)
	case to.Minor > from.Minor+1:
		return fmt.Errorf("%w: %s to %s skips a minor version; upgrade to v%d.%d first", ErrSkew, running, target, from.Major, from.Minor+1)
	case to.Compare(from) < 0:
		return fmt.Errorf("%w: %s to %s is a downgrade; roll the node back to the version it kept instead", ErrSkew, running, target)
	}

	return nil
}

// parseVersion reads "v" then a semantic version.
func parseVersion(v string) (semver.Version, error) {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return semver.Version{}, fmt.Errorf("%w: %q is no version (want v and semver)", ErrSkew, v)
	}

	sv, err := semver.Parse(rest)
	if err != nil {
		return semver.Version{}, fmt.Errorf("%w: %q is no version: %v", ErrSkew, v, err)
	}

	return sv, nil
}
