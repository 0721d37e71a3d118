package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/connect"
)

func newConfigNewCommand(e *env) *cobra.Command {
	var (
		roles  []string
		crtTTL time.Duration
		force  bool
	)

	cmd := &cobra.Command{
		Use:   "new FILE",
		Short: "Have a control plane issue a new client config, written to FILE",
		Example: `  aegisctl config new reader.yaml --roles os:reader --crt-ttl 720h
  aegisctl -n 127.5.0.2 config new ops.yaml --roles os:operator,os:reader`,
		Long: `Have a control plane (the endpoint's own node, or the one node named with -n)
issue a client certificate with --roles for a new key, and write a client
config holding it to FILE (mode 0600), with the endpoints used here. Needs
os:admin. FILE is not replaced unless --force is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := role.Parse(splitList(roles))
			if err != nil {
				return err
			}

			if err = refuseExisting(force, args[0]); err != nil {
				return err
			}

			return e.withSession(cmd, func(ctx context.Context, s *session) error {
				return configNew(ctx, s, args[0], set, crtTTL, force)
			})
		},
	}

	cmd.Flags().StringSliceVar(&roles, "roles", []string{string(role.Admin)}, "roles of the new certificate: os:admin, os:operator, os:reader, os:etcd:backup")
	cmd.Flags().DurationVar(&crtTTL, "crt-ttl", ca.DefaultsFor(ca.ProfileClient).TTL, "lifetime of the new certificate (the node caps it)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")

	return cmd
}

func configNew(ctx context.Context, s *session, path string, roles role.Set, ttl time.Duration, force bool) error {
	if len(s.nodes) > 1 {
		return fmt.Errorf("config new asks one node; %d are named (%s)", len(s.nodes), strings.Join(s.nodes, ", "))
	}

	cfg, err := connect.IssueClientConfig(s.nodeContext(ctx), s.client.MachineClient, roles.Strings(), ttl)
	if err != nil {
		return s.explain(err)
	}

	name, ctxCfg, err := cfg.Current()
	if err != nil {
		return err
	}

	// The node names its own addresses; the endpoints that reached it are
	// the ones known to work from here.
	ctxCfg.Endpoints = s.endpoints

	data, err := cfg.Marshal()
	if err != nil {
		return err
	}

	if err = writeFile(path, data, 0o600, force); err != nil {
		return err
	}

	cert, err := ca.ParseCertificate(ctxCfg.Crt)
	if err != nil {
		return err
	}

	fmt.Fprintf(s.e.stdout, "wrote %s (mode 0600): context %q, roles %s, certificate valid until %s\n",
		path, name, strings.Join(cert.Subject.Organization, ","), expiry(cert, s.e.clock.Now()))

	return nil
}
