package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
)

// env is what the commands read from the outside world, so tests can run
// them in-process with their own clock and output.
type env struct {
	now    func() time.Time
	stdout io.Writer
	stderr io.Writer
	// aegisconfig is the --aegisconfig flag; empty means the default path.
	aegisconfig string
}

func newEnv() *env {
	return &env{now: time.Now, stdout: os.Stdout, stderr: os.Stderr}
}

// clientConfigPath is --aegisconfig, else $AEGISCONFIG, else ~/.aegis/config.
func (e *env) clientConfigPath() (string, error) {
	if e.aegisconfig != "" {
		return e.aegisconfig, nil
	}

	return certs.DefaultClientConfigPath()
}

func newRootCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "aegisctl",
		Short: "Operate Aegis nodes: secrets, configs, certificates and client contexts",
		Long: `aegisctl is the operator CLI of Aegis, a PKI and trust-bootstrap suite for
API-driven nodes. It generates the cluster's secrets bundle, the machine and
client configs made from it, and the certificates of a PKI built by hand.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}

	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().StringVar(&e.aegisconfig, "aegisconfig", "",
		"client config file (default $"+certs.EnvClientConfig+", else ~/.aegis/config)")

	root.AddCommand(newGenCommand(e), newConfigCommand(e), newClusterCommand(e))

	return root
}
