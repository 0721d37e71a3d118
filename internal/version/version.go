// Package version tells which Aegis build is running. `make build` sets Tag
// from `git describe --always --dirty --tags` and Commit from git with
// -ldflags "-X github.com/aegis-os/aegis/internal/version.Tag=…"; otherwise
// the commit and build time come from the Go build info when present.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Tag is the release tag of this build; a build without -ldflags (go run,
// go test, go install) keeps this default.
var Tag = "v0.1.0-dev"

// Commit is the git commit of this build, set by `make build`; the Go build
// info's commit is used where it is empty (builds with -buildvcs=false
// carry none).
var Commit = ""

// Info describes the running build.
type Info struct {
	Tag, Commit, Built, GoVersion, OS, Arch string
}

// Get returns the build's description.
func Get() Info {
	info := Info{Tag: Tag, Commit: Commit, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}

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

// Line is the one line a binary's --version prints:
// "machined v0.1.0-12-gabc1234 (commit abc1234…, go1.26.8, linux/amd64)".
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
