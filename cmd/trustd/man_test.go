package main

import (
	"io"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/manpage"
)

// TestManPages: docs/man holds trustd's man page and bash completion as
// they are generated from its flags now; `make docs` rewrites them.
func TestManPages(t *testing.T) {
	var o options

	c := manpage.Daemon(t, "trustd", "sign node certificates for bootstrap tokens", ".", o.flagSet(io.Discard))
	fresh := t.TempDir()
	manpage.Write(t, c, "8", fresh, "trustd")
	manpage.Check(t, fresh, func(rel string) bool { return rel == "trustd.8" || rel == "bash/trustd" })
}
