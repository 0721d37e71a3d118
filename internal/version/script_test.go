package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionScript runs scripts/version.sh, what `make build` stamps, in
// repositories of each kind and checks that its output is semver and says
// what the brief of the script says.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}

	script, err := filepath.Abs("../../scripts/version.sh")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()

		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com",
			"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))

		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}

		return strings.TrimSpace(string(out))
	}
	commit := func(msg string) {
		t.Helper()

		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(msg), 0o600); err != nil {
			t.Fatal(err)
		}

		run("git", "add", "f")
		run("git", "commit", "-q", "-m", msg)
	}
	expect := func(name, want string) {
		t.Helper()

		got := run("sh", script)
		if !regexp.MustCompile("^"+want+"$").MatchString(got) || !IsSemver(got) {
			t.Errorf("%s: version.sh printed %q, want %s (semver)", name, got, want)
		}
	}

	expect("no git", `v0\.1\.0-dev`)

	run("git", "init", "-q")
	commit("one")
	expect("no tag", `v0\.1\.0-dev\+g[0-9a-f]{12}`)

	run("git", "tag", "v0.2.0")
	expect("on a tag", `v0\.2\.0`)

	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}

	expect("on a tag, changed", `v0\.2\.0\+g[0-9a-f]{12}\.dirty`)

	commit("two")
	commit("three")
	expect("after a tag", `v0\.2\.0\+2\.g[0-9a-f]{12}`)

	run("git", "tag", "v0.3")
	expect("nearest tag not semver", `v0\.2\.0\+2\.g[0-9a-f]{12}`)

	run("git", "tag", "v0.3.0-rc.1")
	expect("pre-release tag", `v0\.3\.0-rc\.1`)
}
