package version

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// Aegis's version-skew policy, which a rolling upgrade relies on:
//
//   - Two nodes interoperate (join, renewal, heartbeats, revocation,
//     routing) when their majors are equal and their minors at most one
//     apart: v0.3.x talks to v0.2.x and v0.4.x, not to v0.1.x.
//   - An upgrade goes to the same minor (any patch, later or equal) or to
//     the next minor of the same major; never two minors at once, never
//     across a major. A lower version is a downgrade, refused as an
//     upgrade: going back is a rollback to the version the node kept.
//   - In 0.x, the minor is the release line, as in 1.x: Aegis keeps the
//     one-minor promise before 1.0 too (semver itself promises nothing in
//     0.x), so that v0.1 to v0.2 is an ordinary upgrade. The major stays
//     the line that is never crossed by an upgrade.
//   - Pre-release and build metadata are read as semver orders them:
//     v0.2.0-dev < v0.2.0, and builds differing only in metadata
//     (v0.1.0-dev+gA, v0.1.0-dev+gB) are the same version, so a
//     development build may replace another.

// ErrSkew is the refusal of a version outside the supported skew.
var ErrSkew = errors.New("version: outside the supported skew")

// ErrDowngrade is the refusal of an upgrade to an older version: going
// back is a rollback to the kept version, not an upgrade.
var ErrDowngrade = errors.New("version: a downgrade is not an upgrade")

// ErrNotSemver is the refusal of a version that is not "v" and semver.
var ErrNotSemver = errors.New("version: not a semantic version")

// parse reads v ("v" then semver).
func parse(v string) (semver.Version, error) {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return semver.Version{}, fmt.Errorf("%w: %q has no leading v", ErrNotSemver, v)
	}

	sv, err := semver.Parse(rest)
	if err != nil {
		return semver.Version{}, fmt.Errorf("%w: %q: %v", ErrNotSemver, v, err)
	}

	return sv, nil
}

// Interoperate reports whether nodes of versions a and b work together in
// one cluster: the same major, minors at most one apart. A version that is
// not semver interoperates with nothing.
func Interoperate(a, b string) bool {
	va, errA := parse(a)
	vb, errB := parse(b)

	if errA != nil || errB != nil || va.Major != vb.Major {
		return false
	}

	return va.Minor <= vb.Minor+1 && vb.Minor <= va.Minor+1
}

// CheckUpgrade returns nil when a node running version running may be
// upgraded to target, and otherwise an error wrapping ErrNotSemver,
// ErrDowngrade or ErrSkew that names both versions and what is allowed.
func CheckUpgrade(running, target string) error {
	from, err := parse(running)
	if err != nil {
		return fmt.Errorf("running version: %w", err)
	}

	to, err := parse(target)
	if err != nil {
		return fmt.Errorf("target version: %w", err)
	}

	switch {
	case to.Major != from.Major:
		return fmt.Errorf("%w: %s to %s crosses a major version; upgrade within v%d", ErrSkew, running, target, from.Major)
	case to.Minor > from.Minor+1:
		return fmt.Errorf("%w: %s to %s skips a minor version; upgrade to v%d.%d.x first", ErrSkew, running, target, from.Major, from.Minor+1)
	case to.Compare(from) < 0:
		return fmt.Errorf("%w: %s to %s; use Rollback to return to the version the node kept", ErrDowngrade, running, target)
	}

	return nil
}
