// Command etcd is the etcd server that machined runs on every control plane:
// etcd's own entry point, built from the go.etcd.io/etcd/server/v3 module pinned
// in go.mod, so that a build needs no prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
