// Command etcd is the etcd server that machined runs on every control plane:
// etcd's own entry point, built from the go.etcd.io/etcd/server/v3 module pinned
// in go.mod, so that a build needs no prebuilt binary.
//
// "etcd restore-snapshot FLAGS" instead builds a member's data directory
// from a snapshot with etcdutl's restore, which machined runs before it
// starts a cluster recovered from a snapshot.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == restoreCommand {
		os.Exit(restore(os.Args[2:]))
	}

	etcdmain.Main(os.Args)
}
