package main

import (
	"os"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// Completions read from local files only: the local clusters' state dir
// and the resource types this build of aegisctl knows.

// servedKinds are the 'get' kinds every node serves beyond the types of
// client/resourcetypes: resource definitions, the cluster's members, the
// machine status and the services (talosctl's names).
var servedKinds = []string{"rd", "members", "machinestatus", "services"}

// completeGetKind completes 'get TYPE': the kinds above and the first
// alias of each Aegis resource type.
func completeGetKind(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}

	kinds := slices.Clone(servedKinds)

	for _, d := range []meta.ResourceDefinitionSpec{
		resourcetypes.CertificateStatusExtension{}.ResourceDefinition(),
		resourcetypes.NTPStatusExtension{}.ResourceDefinition(),
		resourcetypes.MachineConfigExtension{}.ResourceDefinition(),
		resourcetypes.UpgradeStatusExtension{}.ResourceDefinition(),
	} {
		if len(d.Aliases) > 0 {
			kinds = append(kinds, string(d.Aliases[0]))
		}
	}

	return kinds, noFiles
}

// completeClusterName completes --name of the cluster commands with the
// clusters in the state dir (--state-dir, else the default).
func completeClusterName(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	dir, err := cmd.Flags().GetString("state-dir")
	if err != nil || dir == "" {
		if dir, err = localcluster.DefaultStateDir(); err != nil {
			return nil, noFiles
		}
	}

	return localClusterNames(dir), noFiles
}

// localClusterNames are the clusters of stateDir that Load can read.
func localClusterNames(stateDir string) []string {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return nil
	}

	var names []string

	for _, d := range entries {
		if d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			if _, err := localcluster.Load(stateDir, d.Name()); err == nil {
				names = append(names, d.Name())
			}
		}
	}

	return names
}

// localClusterAddresses are the node addresses of every local cluster in
// the default state dir, for -n and -e.
func localClusterAddresses() []string {
	dir, err := localcluster.DefaultStateDir()
	if err != nil {
		return nil
	}

	var addrs []string

	for _, name := range localClusterNames(dir) {
		if c, err := localcluster.Load(dir, name); err == nil {
			addrs = append(addrs, c.Addresses()...)
		}
	}

	return addrs
}
