package main

import (
	"io"
	"testing"

	"github.com/aegis-os/aegis/internal/testutil/manpage"
)

// TestManPages: docs/man holds apid's man page and bash completion as
// they are generated from its flags now; `make docs` rewrites them.
func TestManPages(t *testing.T) {
	var o options

	c := manpage.Daemon(t, "apid", "serve a node's API: mTLS, RBAC and routing to machined", ".", o.flagSet(io.Discard))
	fresh := t.TempDir()
	manpage.Write(t, c, "8", fresh, "apid")
	manpage.Check(t, fresh, func(rel string) bool { return rel == "apid.8" || rel == "bash/apid" })
}
