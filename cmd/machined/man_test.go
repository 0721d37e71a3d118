package main

import (
	"io"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/manpage"
)

// TestManPages: docs/man holds machined's man page and bash completion as
// they are generated from its flags now; `make docs` rewrites them.
func TestManPages(t *testing.T) {
	var o options

	c := manpage.Daemon(t, "machined", "run an Aegis node: its boot sequence and services", ".", o.flagSet(io.Discard))
	fresh := t.TempDir()
	manpage.Write(t, c, "8", fresh, "machined")
	manpage.Check(t, fresh, func(rel string) bool { return rel == "machined.8" || rel == "bash/machined" })
}
