package main

import (
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/manpage"
)

// TestManPages: docs/man holds a man page per aegisctl command as they
// are generated from the command tree now; `make docs` rewrites them.
// aegisctl's completions are not committed: they ask the binary itself
// (`aegisctl __complete`), so the release writes them with `aegisctl
// completion SHELL`.
func TestManPages(t *testing.T) {
	fresh := t.TempDir()
	manpage.Write(t, docRoot(t), "1", fresh, "")
	manpage.Check(t, fresh, func(rel string) bool { return strings.HasPrefix(rel, "aegisctl") })
}
