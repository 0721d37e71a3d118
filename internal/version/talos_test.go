package version

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

// supportedTalosctl are the talosctl versions Aegis answers without a
// warning: the first and last of each minor series it is tested with
// (1.11.5 builds Talos's integration suite, 1.13.9 is the machinery module
// go.mod pins).
var supportedTalosctl = []string{"v1.11.0", "v1.11.5", "v1.12.0", "v1.12.6", "v1.13.0", "v1.13.9"}

// TestTalosTagSatisfiesTalosctl checks TalosTag the way talosctl's
// ClientVersionCheck does (blang/semver's ParseTolerant, then Compare):
// every supported talosctl parses it and finds it no older than itself, for
// every form of Aegis's own version.
func TestTalosTagSatisfiesTalosctl(t *testing.T) {
	defer func(tag string) { Tag = tag }(Tag)

	for _, own := range []string{
		"v0.2.0", "v0.2.0+3.g1a2b3c4d5e6f.dirty", "v0.1.0-dev+g1a2b3c4d5e6f", Dev, "22465fc", "v0.3.0-rc.1+g1a2b3c4d5e6f",
	} {
		Tag = own

		tag := TalosTag()

		server, err := semver.ParseTolerant(tag)
		if err != nil {
			t.Fatalf("Aegis %s: talosctl cannot parse %q: %v", own, tag, err)
		}

		for _, c := range supportedTalosctl {
			client := semver.MustParse(strings.TrimPrefix(c, "v"))
			if server.Compare(client) < 0 {
				t.Errorf("Aegis %s: talosctl %s warns that %s is older", own, c, server)
			}
		}

		if later := semver.MustParse("1.14.0"); server.Compare(later) >= 0 {
			t.Errorf("Aegis %s: %s claims more than the Talos API %s", own, tag, TalosAPI)
		}

		got, api, ok := FromTalosTag(tag)
		if !ok || got != Get().Tag || api != TalosAPI {
			t.Errorf("FromTalosTag(%q) = %q, %q, %v; want %q, %q", tag, got, api, ok, Get().Tag, TalosAPI)
		}
	}
}

func TestTalosTagForm(t *testing.T) {
	defer func(tag string) { Tag = tag }(Tag)

	for own, want := range map[string]string{
		"v0.2.0":                         "v1.13.9+aegis.v0.2.0",
		"v0.1.0-dev+g1a2b3c4d5e6f.dirty": "v1.13.9+aegis.v0.1.0-dev.build.g1a2b3c4d5e6f.dirty",
	} {
		Tag = own
		if got := TalosTag(); got != want {
			t.Errorf("Aegis %s: TalosTag() = %q, want %q", own, got, want)
		}
	}
}

func TestFromTalosTagRefuses(t *testing.T) {
	for _, tag := range []string{"v1.13.9", "v0.2.0", "22465fc", "v1.13.9+aegis.", "v1.13.9+aegis.22465fc", "1.x+aegis.v0.2.0"} {
		if a, api, ok := FromTalosTag(tag); ok {
			t.Errorf("FromTalosTag(%q) = %q, %q, true; want not an Aegis tag", tag, a, api)
		}
	}
}

// TestTalosAPIIsPinned: TalosAPI is the machinery version go.mod pins.
func TestTalosAPIIsPinned(t *testing.T) {
	f, err := os.Open("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const module = "github.com/siderolabs/talos/pkg/machinery"

	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == module {
			if fields[1] != TalosAPI {
				t.Fatalf("go.mod pins %s %s, TalosAPI is %s: change TalosAPI with the pin", module, fields[1], TalosAPI)
			}

			return
		}
	}

	t.Fatalf("go.mod does not require %s", module)
}
