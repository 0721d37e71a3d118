package main

import (
	"flag"
	"fmt"
	"os"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// restoreCommand is the first argument that selects a restore.
const restoreCommand = "restore-snapshot"

// restore builds a one-member data directory from a snapshot, as
// `etcdutl snapshot restore` does; it returns the exit code.
func restore(args []string) int {
	fs := flag.NewFlagSet(restoreCommand, flag.ContinueOnError)

	var cfg snapshot.RestoreConfig

	fs.StringVar(&cfg.SnapshotPath, "snapshot", "", "snapshot file")
	fs.StringVar(&cfg.Name, "name", "", "member name")
	fs.StringVar(&cfg.OutputDataDir, "data-dir", "", "data directory to create (must not exist)")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "NAME=PEER-URL of the new cluster")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "", "token of the new cluster")

	peerURL := fs.String("initial-advertise-peer-urls", "", "the member's peer URL")

	if err := fs.Parse(args); err != nil {
		return 2
	}

	if cfg.SnapshotPath == "" || cfg.Name == "" || cfg.OutputDataDir == "" || cfg.InitialCluster == "" || *peerURL == "" {
		fmt.Fprintln(os.Stderr, "restore-snapshot: --snapshot, --name, --data-dir, --initial-cluster and --initial-advertise-peer-urls are required")

		return 2
	}

	cfg.PeerURLs = []string{*peerURL}

	lg, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)

		return 1
	}

	if err := snapshot.NewV3(lg).Restore(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "restore-snapshot:", err)

		return 1
	}

	return 0
}
