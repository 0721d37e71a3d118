// Package version tells which Aegis build is running. `make build` sets Tag
// from scripts/version.sh (always semver: the tag on a tagged commit,
// v0.1.0-dev+g<commit> without tags, `.dirty` in the build metadata of a
// work tree with changes) and Commit from git with
// -ldflags "-X github.com/aegis-os/aegis/internal/version.Tag=…"; otherwise
// the commit and build time come from the Go build info when present.
//
// Two versions are told apart: Aegis's own (Get().Tag, what every binary's
// --version and aegisctl print) and the tag Aegis reports to Talos clients
// (TalosTag: the Talos API version Aegis implements, Aegis's own version in
// its build metadata), see talos.go.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/blang/semver/v4"
)

// Dev is Aegis's version where nothing better is known: a build without
// -ldflags (go run, go test, go install), or `make build` without git.
const Dev = "v0.1.0-dev"

// Tag is the version stamped into this build; a build without -ldflags
// keeps Dev. Get reads it through Semver, so a hand-set value that is not
// semver still gives a valid version.
var Tag = Dev

// Commit is the git commit of this build, set by `make build`; the Go build
// info's commit is used where it is empty (builds with -buildvcs=false
// carry none).
var Commit = ""

// Info describes the running build. Tag is Aegis's own version, always
// valid semver with a leading "v".
type Info struct {
	Tag, Commit, Built, GoVersion, OS, Arch string
}

// Get returns the build's description.
func Get() Info {
	info := Info{Tag: Semver(Tag), Commit: Commit, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}

	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				info.Built = s.Value
			}
		}
	}

	return info
}

// Semver returns tag when it is a valid semantic version with a leading
// "v" (as blang/semver's strict Parse, the parser talosctl uses, reads it);
// anything else becomes Dev with tag's characters kept as build metadata,
// so that the value stays recognisable: "22465fc-dirty" becomes
// "v0.1.0-dev+22465fc-dirty".
func Semver(tag string) string {
	if IsSemver(tag) {
		return tag
	}

	if meta := buildIdentifiers(tag); meta != "" {
		return Dev + "+" + meta
	}

	return Dev
}

// IsSemver reports whether v is "v" followed by a valid semantic version
// (semver.org 2.0.0: major.minor.patch, optional pre-release and build).
func IsSemver(v string) bool {
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return false
	}

	_, err := semver.Parse(rest)

	return err == nil
}

// buildIdentifiers turns s into dot-separated build identifiers: every
// character outside [0-9A-Za-z-] becomes a dot, and empty identifiers are
// dropped.
func buildIdentifiers(s string) string {
	ids := strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})

	return strings.Join(ids, ".")
}

// Line is the one line a binary's --version prints:
// "machined v0.2.0+3.g1a2b3c4d5e6f (commit 1a2b3c4d5e6f, go1.26.8, linux/amd64)".
func Line(program string) string {
	v := Get()

	details := []string{v.GoVersion, v.OS + "/" + v.Arch}
	if v.Commit != "" {
		details = append([]string{"commit " + shortCommit(v.Commit)}, details...)
	}

	return fmt.Sprintf("%s %s (%s)", program, v.Tag, strings.Join(details, ", "))
}

// shortCommit is a commit hash cut to 12 digits, as git shows it.
func shortCommit(c string) string {
	const short = 12
	if len(c) > short {
		return c[:short]
	}

	return c
}
