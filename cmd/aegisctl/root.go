package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/version"
)

// env is what the commands read from the outside world, so tests can run
// them in-process with their own clock and output.
type env struct {
	clock  clock.Clock
	stdout io.Writer
	stderr io.Writer
	// aegisconfig is the --aegisconfig flag; empty means the default path.
	aegisconfig string
	// target is what the node commands talk to, from the global flags.
	target targetFlags
	// joinTransport calls trustd for 'certificate request'; nil means
	// gRPC over TLS.
	joinTransport join.Transport
}

// targetFlags pick the context, the endpoints a node command connects to
// and the nodes it addresses; empty values come from the context.
type targetFlags struct {
	context   string
	endpoints []string
	nodes     []string
}

func newEnv() *env {
	return &env{clock: clock.Real(), stdout: os.Stdout, stderr: os.Stderr}
}

// clientConfigPath is --aegisconfig, else $AEGISCONFIG, else $TALOSCONFIG,
// else ~/.aegis/config.
func (e *env) clientConfigPath() (string, error) {
	if e.aegisconfig != "" {
		return e.aegisconfig, nil
	}

	return certs.DefaultClientConfigPath()
}

func newRootCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "aegisctl",
		Short: "Operate Aegis nodes: secrets, configs, certificates, client contexts and the nodes themselves",
		Long: `aegisctl is the operator CLI of Aegis, a PKI and trust-bootstrap suite for
API-driven nodes. It generates the cluster's secrets bundle, the machine and
client configs made from it, and the certificates of a PKI built by hand; it
runs local clusters; and it drives nodes through their API: versions,
memory, services, logs, events, health, reboots, client configs and
bootstrap tokens.

Node commands connect to the context's endpoints (-e) and run on the nodes
named with -n, through the endpoint; without nodes they run on the
endpoint's own node. The client certificate is renewed before a command
runs once less than a third of its lifetime is left.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}

	// --version prints the line the daemons' --version print; 'aegisctl
	// version --client' shows the same build in talosctl's layout.
	root.Version = version.Get().Tag
	root.SetVersionTemplate(version.Line("aegisctl") + "\n")
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().StringVar(&e.aegisconfig, "aegisconfig", "",
		"client config file (default $"+certs.EnvClientConfig+", else $"+certs.EnvTalosConfig+", else ~/.aegis/config)")

	// talosctl users type --talosconfig; it sets the same file.
	root.PersistentFlags().StringVar(&e.aegisconfig, "talosconfig", "", "alias of --aegisconfig, as talosctl spells it")

	root.PersistentFlags().StringVar(&e.target.context, "context", "", "context of the client config to use (default: its current context)")
	root.PersistentFlags().StringSliceVarP(&e.target.endpoints, "endpoints", "e", nil,
		"apid endpoints to connect to, repeatable or comma-separated (default: the context's)")
	root.PersistentFlags().StringSliceVarP(&e.target.nodes, "nodes", "n", nil,
		"nodes to run the command on, through the endpoint, repeatable or comma-separated (default: the context's; none: the endpoint's own node)")

	registerCompletions(e, root)

	root.AddCommand(newGenCommand(e), newConfigCommand(e), newClusterCommand(e), newCertificateCommand(e))
	root.AddCommand(nodeCommands(e)...)
	strictGroups(root)
	setExamples(root)

	return root
}
