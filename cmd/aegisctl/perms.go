package main

import (
	"fmt"
	"os"
)

// warnShared warns, as ssh does, when a file that holds a private key
// (a client config, a key, a secrets bundle) may be read by others, naming
// the file and the chmod that fixes it. It warns rather than refuses: the
// file was readable before aegisctl ran, and refusing would lock an
// operator out of a cluster over a mode. A file that cannot be read is
// left to the read that follows, which says why.
func (e *env) warnShared(path, what string) {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o077 == 0 {
		return
	}

	fmt.Fprintf(e.stderr, "warning: %s %s is readable by others (mode %04o) and holds a private key: run 'chmod 600 %s'\n",
		what, path, st.Mode().Perm(), shellQuote(path))
}
