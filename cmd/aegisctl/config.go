package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
)

func newConfigCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage the client config: contexts, endpoints, nodes, new configs, renewal, revocation",
	}

	cmd.AddCommand(
		newConfigContextsCommand(e),
		&cobra.Command{
			Use:   "context NAME",
			Short: "Make NAME the current context",
			Example: `  aegisctl config context aegis-local
  aegisctl config contexts            # the names to choose from`,
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: e.completeContextArg,
			RunE: func(_ *cobra.Command, args []string) error {
				return withClientConfig(e, true, func(c *certs.ClientConfig) error {
					if _, ok := c.Contexts[args[0]]; !ok {
						return noContext(args[0], c)
					}

					c.Context = args[0]

					return nil
				})
			},
		},
		newSetListCommand(e, "endpoint", "Set the endpoints (apid addresses) of the current context",
			func(ctx *certs.ClientContext, v []string) { ctx.Endpoints = v }),
		newSetListCommand(e, "node", "Set the default nodes of the current context",
			func(ctx *certs.ClientContext, v []string) { ctx.Nodes = v }),
		newConfigAddCommand(e),
		newConfigRemoveCommand(e),
		newConfigMergeCommand(e),
		newConfigNewCommand(e),
		newConfigRenewCommand(e),
		newConfigRevokeCommand(e),
		newConfigRevocationsCommand(e),
		newConfigInfoCommand(e),
	)

	return cmd
}

func newConfigContextsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "contexts",
		Short: "List the contexts",
		Args:  cobra.NoArgs,
	}

	format := addDocumentFlag(cmd)

	cmd.RunE = func(*cobra.Command, []string) error {
		return withClientConfig(e, false, func(c *certs.ClientConfig) error {
			if *format != formatTable {
				return writeDocument(e.stdout, *format, contextsDocument(c))
			}

			return listContexts(e, c)
		})
	}

	return cmd
}

func newConfigInfoCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the current context: endpoints, nodes, roles, certificate expiry, CA fingerprint",
		Args:  cobra.NoArgs,
	}

	format := addDocumentFlag(cmd)

	cmd.RunE = func(*cobra.Command, []string) error {
		return withClientConfig(e, false, func(c *certs.ClientConfig) error {
			name, ctx, err := pickContext(c, e.target.context)
			if err != nil {
				return err
			}

			if *format == formatTable {
				return printContext(e, name, ctx)
			}

			doc, err := contextInfoDocument(name, ctx, e.clock.Now())
			if err != nil {
				return err
			}

			return writeDocument(e.stdout, *format, doc)
		})
	}

	return cmd
}

func newSetListCommand(e *env, use, short string, set func(*certs.ClientContext, []string)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ADDR...",
		Short: short,
		Example: fmt.Sprintf(`  aegisctl config %[1]s 127.5.0.2 127.5.0.3
  aegisctl config %[1]s 10.0.0.1,10.0.0.2
  aegisctl --context prod config %[1]s cp-1.example`, use),
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			addrs := splitList(args)
			for _, a := range addrs {
				if err := certs.CheckHostPort(a); err != nil {
					return err
				}
			}

			return withClientConfig(e, true, func(c *certs.ClientConfig) error {
				_, ctx, err := pickContext(c, e.target.context)
				if err != nil {
					return err
				}

				set(ctx, addrs)

				return nil
			})
		},
	}
}

func newConfigMergeCommand(e *env) *cobra.Command {
	var force bool

	cmd := &cobra.Command{
		Use:   "merge FILE",
		Short: "Merge the contexts of FILE into the client config",
		Example: `  aegisctl config merge ./aegisconfig
  aegisctl --aegisconfig ~/.aegis/config config merge new-admin.yaml --force`,
		Long: `Merge the contexts of FILE into the client config and make FILE's current
context current. A context whose name is taken is added as NAME-1, NAME-2, …
unless --force is given, which replaces it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			other, err := certs.LoadClientConfig(args[0])
			if err != nil {
				return err
			}

			return withClientConfig(e, true, func(c *certs.ClientConfig) error {
				for _, r := range c.Merge(other, force) {
					fmt.Fprintf(e.stdout, "context %q exists; added as %q\n", r.From, r.To)
				}

				fmt.Fprintf(e.stdout, "current context: %s\n", c.Context)

				return nil
			})
		},
	}

	cmd.Flags().BoolVar(&force, "force", false, "replace contexts of the same name")

	return cmd
}

// withClientConfig loads the client config, runs fn on it and, if write is
// set, saves it back atomically. A missing file is an empty config when
// writing and an error when only reading.
func withClientConfig(e *env, write bool, fn func(*certs.ClientConfig) error) error {
	path, err := e.clientConfigPath()
	if err != nil {
		return err
	}

	e.warnShared(path, "client config")

	var c *certs.ClientConfig
	if write {
		c, err = certs.LoadOrNewClientConfig(path)
	} else {
		c, err = loadClientConfig(path)
	}

	if err != nil {
		return err
	}

	if err = fn(c); err != nil {
		return err
	}

	if !write {
		return nil
	}

	return c.Save(path)
}

func listContexts(e *env, c *certs.ClientConfig) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tNAME\tENDPOINTS\tNODES")

	for _, name := range contextNames(c) {
		mark := ""
		if name == c.Context {
			mark = "*"
		}

		ctx := c.Contexts[name]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, name, strings.Join(ctx.Endpoints, ","), strings.Join(ctx.Nodes, ","))
	}

	return tw.Flush()
}

func printContext(e *env, name string, ctx *certs.ClientContext) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "context:\t%s\n", name)
	fmt.Fprintf(tw, "endpoints:\t%s\n", orNone(ctx.Endpoints))
	fmt.Fprintf(tw, "nodes:\t%s\n", orNone(ctx.Nodes))

	if len(ctx.Unknown) > 0 {
		fmt.Fprintf(tw, "other fields:\t%s (kept, not read by Aegis)\n", strings.Join(slices.Sorted(maps.Keys(ctx.Unknown)), ", "))
	}

	var certRows []func(*certTable)

	if len(ctx.Crt) > 0 {
		cert, err := ca.ParseCertificate(ctx.Crt)
		if err != nil {
			return fmt.Errorf("context %s: client certificate: %w", name, err)
		}

		roles, unknown := role.FromOrganization(cert.Subject.Organization)
		fmt.Fprintf(tw, "roles:\t%s\n", orNone(roles.Strings()))

		if len(unknown) > 0 {
			fmt.Fprintf(tw, "ignored:\t%s (not Aegis roles)\n", strings.Join(unknown, ", "))
		}

		certRows = append(certRows, func(t *certTable) { t.add("client", cert) })
	}

	if len(ctx.CA) > 0 {
		cas, err := ca.ParseCertificates(ctx.CA)
		if err != nil {
			return fmt.Errorf("context %s: CA: %w", name, err)
		}

		for _, c := range cas {
			certRows = append(certRows, func(t *certTable) { t.add("CA", c) })
		}
	}

	if err := tw.Flush(); err != nil {
		return err
	}

	if len(certRows) > 0 {
		t := newCertTable(e.stdout, e.clock.Now())
		for _, row := range certRows {
			row(t)
		}

		t.flush()
	}

	return nil
}

// noContext is the error for a context name the config does not have.
func noContext(name string, c *certs.ClientConfig) error {
	if len(c.Contexts) == 0 {
		return fmt.Errorf("no context %q: the client config has no contexts yet (add one with 'aegisctl config merge FILE')", name)
	}

	return fmt.Errorf("no context %q (have: %s)", name, strings.Join(contextNames(c), ", "))
}

// noCurrentContext explains a client config without a current context
// (its cluster was destroyed, or it was never set) and the way on.
func noCurrentContext(c *certs.ClientConfig) error {
	if len(c.Contexts) == 0 {
		return errors.New("the client config has no contexts (its cluster was destroyed?): " +
			"create a cluster with 'aegisctl cluster create', or add a client config with 'aegisctl config merge FILE'")
	}

	if c.Context == "" {
		return fmt.Errorf("the client config has no current context: pick one with 'aegisctl config context NAME' (have: %s), or give --context",
			strings.Join(contextNames(c), ", "))
	}

	return fmt.Errorf("the client config's current context %q does not exist: pick one with 'aegisctl config context NAME' (have: %s)",
		c.Context, strings.Join(contextNames(c), ", "))
}

func contextNames(c *certs.ClientConfig) []string {
	return slices.Sorted(maps.Keys(c.Contexts))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}

	return strings.Join(list, ", ")
}

// splitList accepts both repeated arguments and comma lists.
func splitList(args []string) []string {
	var out []string

	for _, a := range args {
		for p := range strings.SplitSeq(a, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}

	return out
}
