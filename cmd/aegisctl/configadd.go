package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
)

// 'config add' and 'config remove', as talosctl spells them: a context made
// from files an operator holds (a CA and a client certificate made with
// 'gen key/csr/crt', or handed out), and the way to drop one.

// configAddFlags are the flags of 'config add'.
type configAddFlags struct {
	endpoints, nodes []string
	ca, crt, key     string
}

func newConfigAddCommand(e *env) *cobra.Command {
	var f configAddFlags

	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a context from a CA, a client certificate and its key",
		Long: `Add the context NAME to the client config: the endpoints it connects to, its
default nodes, and the credentials read from PEM files (the CA that signed the
nodes' certificates, a client certificate and its key). The current context
stays as it is; switch with 'aegisctl config context NAME'. A context of that
name already there is refused: remove it first.`,
		Example: `  aegisctl gen key --name admin && aegisctl gen csr --key admin.key
  aegisctl gen crt --ca ca --csr admin.csr --name admin
  aegisctl config add lab --endpoints 10.0.0.2,10.0.0.3 --nodes 10.0.0.2 --ca ca.crt --crt admin.crt --key admin.key
  aegisctl config context lab`,
		Args: cobra.ExactArgs(1),
	}

	cmd.Flags().StringSliceVarP(&f.endpoints, "endpoints", "e", nil, "apid endpoints of the context (required)")
	cmd.Flags().StringSliceVarP(&f.nodes, "nodes", "n", nil, "default nodes of the context")
	cmd.Flags().StringVar(&f.ca, "ca", "", "PEM file of the CA the nodes' certificates chain to (required)")
	cmd.Flags().StringVar(&f.crt, "crt", "", "PEM file of the client certificate (required)")
	cmd.Flags().StringVar(&f.key, "key", "", "PEM file of the client certificate's key (required)")

	for _, name := range []string{"endpoints", "ca", "crt", "key"} {
		//nolint:errcheck // the flags exist
		cmd.MarkFlagRequired(name)
	}

	cmd.RunE = func(_ *cobra.Command, args []string) error {
		ctx, err := f.context(e)
		if err != nil {
			return err
		}

		return withClientConfig(e, true, func(c *certs.ClientConfig) error {
			if _, ok := c.Contexts[args[0]]; ok {
				return fmt.Errorf("context %q is already in the client config: remove it first ('aegisctl config remove %s')", args[0], args[0])
			}

			if c.Contexts == nil {
				c.Contexts = map[string]*certs.ClientContext{}
			}

			c.Contexts[args[0]] = ctx
			fmt.Fprintf(e.stdout, "added context %q; use it with 'aegisctl config context %s'\n", args[0], args[0])

			return nil
		})
	}

	return cmd
}

// context reads the files the flags name into a context. The key file is
// checked for its mode as the client config is.
func (f *configAddFlags) context(e *env) (*certs.ClientContext, error) {
	ctx := &certs.ClientContext{Endpoints: f.endpoints, Nodes: f.nodes}

	for _, file := range []struct {
		path string
		to   *certs.Base64PEM
	}{{f.ca, &ctx.CA}, {f.crt, &ctx.Crt}, {f.key, &ctx.Key}} {
		data, err := os.ReadFile(file.path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file.path, err)
		}

		*file.to = data
	}

	e.warnShared(f.key, "client key")

	if _, err := certs.NewKeyPair(ctx.Crt, ctx.Key); err != nil {
		return nil, fmt.Errorf("%s and %s do not make a client certificate: %w", f.crt, f.key, err)
	}

	return ctx, nil
}

func newConfigRemoveCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a context from the client config",
		Long: `Remove the context NAME from the client config. The current context is
refused: switch to another one first ('aegisctl config context OTHER').`,
		Example: `  aegisctl config contexts             # the names
  aegisctl config remove old-lab`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeRemovableContext,
		RunE: func(_ *cobra.Command, args []string) error {
			return withClientConfig(e, true, func(c *certs.ClientConfig) error {
				if _, ok := c.Contexts[args[0]]; !ok {
					return noContext(args[0], c)
				}

				if c.Context == args[0] {
					return fmt.Errorf("context %q is the current one: switch first ('aegisctl config context OTHER'), then remove it", args[0])
				}

				delete(c.Contexts, args[0])
				fmt.Fprintf(e.stdout, "removed context %q\n", args[0])

				return nil
			})
		},
	}
}

// completeRemovableContext completes 'config remove NAME': every context but
// the current one, which remove refuses.
func (e *env) completeRemovableContext(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c := e.completionConfig()
	if c == nil || len(args) > 0 {
		return nil, noFiles
	}

	var names []string

	for _, n := range contextNames(c) {
		if n != c.Context {
			names = append(names, n)
		}
	}

	return names, noFiles
}
