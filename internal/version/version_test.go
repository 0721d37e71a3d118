package version

import (
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

func TestSemver(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v0.2.0", "v0.2.0"},
		{"v0.2.0-rc.1", "v0.2.0-rc.1"},
		{"v0.2.0+3.g1a2b3c4d5e6f.dirty", "v0.2.0+3.g1a2b3c4d5e6f.dirty"},
		{"v0.1.0-dev+g1a2b3c4d5e6f", "v0.1.0-dev+g1a2b3c4d5e6f"},
		// What `git describe --always --dirty --tags` stamped before.
		{"22465fc", "v0.1.0-dev+22465fc"},
		{"22465fc-dirty", "v0.1.0-dev+22465fc-dirty"},
		{"v0.2.0-3-g1a2b3c4", "v0.2.0-3-g1a2b3c4"},
		// Not semver: no "v", short, leading zeros, bad characters.
		{"0.2.0", "v0.1.0-dev+0.2.0"},
		{"v1.2", "v0.1.0-dev+v1.2"},
		{"v01.2.3", "v0.1.0-dev+v01.2.3"},
		{"release 7/2026", "v0.1.0-dev+release.7.2026"},
		{"", Dev},
		{"+++", Dev},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := Semver(tc.in)
			if got != tc.want {
				t.Fatalf("Semver(%q) = %q, want %q", tc.in, got, tc.want)
			}

			if _, err := semver.Parse(strings.TrimPrefix(got, "v")); err != nil {
				t.Fatalf("Semver(%q) = %q, which semver refuses: %v", tc.in, got, err)
			}
		})
	}
}

func TestGetMendsTag(t *testing.T) {
	defer func(tag string) { Tag = tag }(Tag)

	Tag = "22465fc-dirty"

	if got := Get().Tag; got != "v0.1.0-dev+22465fc-dirty" {
		t.Fatalf("Get().Tag = %q", got)
	}

	if got := Line("machined"); !strings.HasPrefix(got, "machined v0.1.0-dev+22465fc-dirty (") {
		t.Fatalf("Line = %q", got)
	}
}
