// Package version tells which Aegis build is running. Tag is set at build
// time with -ldflags "-X github.com/aegis-os/aegis/internal/version.Tag=…";
// the commit and build time come from the Go build info when present.
package version

import (
	"runtime"
	"runtime/debug"
)

// Tag is the release tag of this build.
var Tag = "v0.1.0-dev"

// Info describes the running build.
type Info struct {
	Tag, Commit, Built, GoVersion, OS, Arch string
}

// Get returns the build's description.
func Get() Info {
	info := Info{Tag: Tag, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}

	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.Built = s.Value
			}
		}
	}

	return info
}
