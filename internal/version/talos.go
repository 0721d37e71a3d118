package version

import "strings"

// TalosAPI is the version of the Talos API Aegis implements: the version of
// the machinery module (github.com/siderolabs/talos/pkg/machinery) that
// go.mod pins, whose generated types Aegis serves. A test keeps the two in
// step.
const TalosAPI = "v1.13.9"

// talosMarker starts the build metadata of TalosTag; buildMarker stands for
// the "+" of Aegis's own version inside it (a build identifier cannot hold
// a "+").
const (
	talosMarker = "+aegis."
	buildMarker = ".build."
)

// TalosTag is what Aegis reports to Talos clients in VersionInfo.Tag (and
// in the version resource): TalosAPI with Aegis's own version as build
// metadata, "v1.13.9+aegis.v0.2.0" or
// "v1.13.9+aegis.v0.1.0-dev.build.g1a2b3c4d5e6f.dirty".
//
// talosctl (1.11 to 1.13) parses this tag with blang/semver before get,
// reboot, shutdown, reset and edit, and warns when it is older than its own
// version. Semver ignores build metadata when comparing, so a talosctl of
// TalosAPI's version or older sees a server of its own version or newer and
// prints nothing, while the tag still names the Aegis build. A later
// talosctl warns, rightly: the node implements an older API than it knows.
func TalosTag() string {
	return TalosTagOf(Get().Tag)
}

// TalosTagOf is the TalosTag of a build whose own version is tag (as its
// --version line prints it).
func TalosTagOf(tag string) string {
	return TalosAPI + talosMarker + strings.Replace(tag, "+", buildMarker, 1)
}

// FromTalosTag reads Aegis's own version back out of a TalosTag, and the
// Talos API version before it; ok is false for a tag that is not one
// (a Talos node's, or an Aegis node's from before TalosTag existed).
func FromTalosTag(tag string) (aegis, talosAPI string, ok bool) {
	talosAPI, meta, found := strings.Cut(tag, talosMarker)
	if !found || !IsSemver(talosAPI) {
		return "", "", false
	}

	aegis = strings.Replace(meta, buildMarker, "+", 1)
	if !IsSemver(aegis) {
		return "", "", false
	}

	return aegis, talosAPI, true
}
