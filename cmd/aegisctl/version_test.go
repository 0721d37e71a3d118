package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/internal/version"
)

// TestWriteVersionOfNode: an Aegis node's tag is printed as Aegis's own
// version with the Talos API version on a line of its own; any other tag
// (a Talos node's) as it is.
func TestWriteVersionOfNode(t *testing.T) {
	for _, tc := range []struct{ tag, want, notWant string }{
		{
			tag:  "v1.13.9+aegis.v0.1.0-dev.build.g1a2b3c4d5e6f.dirty",
			want: "\tTag:         v0.1.0-dev+g1a2b3c4d5e6f.dirty\n", notWant: "v1.13.9+",
		},
		{tag: version.TalosTag(), want: "\tTag:         " + version.Get().Tag + "\n\tSHA:"},
		{tag: "v1.13.9", want: "\tTag:         v1.13.9\n", notWant: "Talos API"},
	} {
		var out bytes.Buffer

		writeVersion(&out, &machine.VersionInfo{Tag: tc.tag, Sha: "abc"}, false)

		if !strings.Contains(out.String(), tc.want) || tc.notWant != "" && strings.Contains(out.String(), tc.notWant) {
			t.Errorf("tag %s printed:\n%s", tc.tag, out.String())
		}

		if _, _, aegis := version.FromTalosTag(tc.tag); aegis && !strings.HasSuffix(out.String(), "\tTalos API:   "+version.TalosAPI+"\n") {
			t.Errorf("tag %s: no Talos API line:\n%s", tc.tag, out.String())
		}
	}
}

// TestVersionShort: --short prints each tag alone, Aegis's own version for
// an Aegis node, and no platform.
func TestVersionShort(t *testing.T) {
	resp := &machine.VersionResponse{Messages: []*machine.Version{
		{
			Version:  &machine.VersionInfo{Tag: "v1.13.9+aegis.v0.2.0", Sha: "abc", GoVersion: "go1.26"},
			Platform: &machine.PlatformInfo{Name: "aegis", Mode: "container"},
		},
	}}

	var out bytes.Buffer

	versionTable(&out, resp, false, true)

	if got, want := out.String(), "\tTag:         v0.2.0\n"; got != want {
		t.Errorf("--short printed %q, want %q", got, want)
	}
}
