// Command etcd is the etcd server that machined runs on every control plane,
// built from the go.etcd.io/etcd/server/v3 module pinned in go.mod, so that
// a build needs no prebuilt binary. It takes etcd's own flags (not its
// ETCD_* environment variables or --config-file: machined passes flags
// alone) and runs the server as etcd's entry point does, except for its
// stop (serve.go): the streams still open a second after SIGTERM are
// ended, where etcd waits its whole request timeout for them.
//
// "etcd restore-snapshot FLAGS" instead builds a member's data directory
// from a snapshot with etcdutl's restore, which machined runs before it
// starts a cluster recovered from a snapshot.
package main

import "os"

func main() {
	if len(os.Args) > 1 && os.Args[1] == restoreCommand {
		os.Exit(restore(os.Args[2:]))
	}

	os.Exit(serve(os.Args[1:]))
}
