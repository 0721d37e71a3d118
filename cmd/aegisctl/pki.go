package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

func newGenCACommand(e *env) *cobra.Command {
	var (
		name, org, cn, keyType string
		validity               time.Duration
		force                  bool
	)

	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Generate a self-signed CA (NAME.crt and NAME.key)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kt, err := ca.ParseKeyType(keyType)
			if err != nil {
				return err
			}

			crtPath, keyPath := name+".crt", name+".key"
			if err = refuseExisting(force, crtPath, keyPath); err != nil {
				return err
			}

			c, err := ca.Generate(ca.Config{KeyType: kt, Organization: org, CommonName: cn, Validity: validity, Clock: e.clock})
			if err != nil {
				return err
			}

			if err = c.WriteFiles(crtPath, keyPath, force); err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "wrote %s and %s (key mode 0600)\n", crtPath, keyPath)

			t := newCertTable(e.stdout, e.clock.Now())
			t.add("CA", c.Cert)
			t.flush()

			return nil
		},
	}

	f := cmd.Flags()
	f.StringVar(&name, "name", "ca", "path prefix of the files to write")
	f.StringVar(&org, "organization", "aegis", "Organization of the CA subject")
	f.StringVar(&cn, "common-name", "", "CommonName of the CA subject")
	f.StringVar(&keyType, "key-type", string(ca.Ed25519), "ed25519 or ecdsa-p256")
	f.DurationVar(&validity, "validity", ca.CAValidity, "lifetime of the CA")
	f.BoolVar(&force, "force", false, "replace existing files")

	return cmd
}

func newGenKeyCommand(e *env) *cobra.Command {
	var (
		name, keyType string
		force         bool
	)

	cmd := &cobra.Command{
		Use:   "key",
		Short: "Generate a private key (NAME.key, mode 0600)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kt, err := ca.ParseKeyType(keyType)
			if err != nil {
				return err
			}

			key, keyPEM, err := ca.NewKeyPEM(kt, nil)
			if err != nil {
				return err
			}

			if err = writeFile(name+".key", keyPEM, 0o600, force); err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "wrote %s.key (%s, mode 0600)\n", name, ca.DescribeKey(key.Public()))

			return nil
		},
	}

	cmd.Flags().StringVar(&name, "name", "", "path prefix of the key file (required)")
	cmd.Flags().StringVar(&keyType, "key-type", string(ca.Ed25519), "ed25519 or ecdsa-p256")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	cmd.MarkFlagRequired("name") //nolint:errcheck // the flag exists

	return cmd
}

func newGenCSRCommand(e *env) *cobra.Command {
	var (
		keyPath, cn, out string
		ips, dns         []string
		force            bool
	)

	cmd := &cobra.Command{
		Use:   "csr",
		Short: "Generate a certificate request for a key",
		Long: `Generate a certificate request for a key. The request carries the key, a
common name and SANs only: roles, usages and lifetime are decided by whoever
signs it (aegisctl gen crt --profile/--roles/--ttl).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.warnShared(keyPath, "key")

			key, err := ca.LoadKeyFile(keyPath)
			if err != nil {
				return err
			}

			base := strings.TrimSuffix(keyPath, filepath.Ext(keyPath))
			if cn == "" {
				cn = filepath.Base(base)
			}

			if out == "" {
				out = base + ".csr"
			}

			csrPEM, err := ca.NewCheckedCSR(key, cn, append(append([]string{}, ips...), dns...))
			if err != nil {
				return err
			}

			if err = writeFile(out, csrPEM, 0o644, force); err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "wrote %s (CN=%s, SANs: %s)\n", out, cn, strings.Join(append(append([]string{}, ips...), dns...), ", "))

			return nil
		},
	}

	f := cmd.Flags()
	f.StringVar(&keyPath, "key", "", "private key file (required)")
	f.StringVar(&cn, "cn", "", "common name (default: the key file's base name)")
	f.StringSliceVar(&ips, "ip", nil, "IP address SANs, repeatable")
	f.StringSliceVar(&dns, "dns", nil, "DNS name SANs, repeatable")
	f.StringVarP(&out, "output", "o", "", "file to write (default: the key's path with .csr)")
	f.BoolVar(&force, "force", false, "replace an existing file")
	cmd.MarkFlagRequired("key") //nolint:errcheck // the flag exists

	return cmd
}

func newGenCrtCommand(e *env) *cobra.Command {
	var (
		caPrefix, csrPath, name, profile string
		roles                            []string
		ttl                              time.Duration
		force                            bool
	)

	cmd := &cobra.Command{
		Use:   "crt",
		Short: "Sign a CSR with a CA under a profile (NAME.crt)",
		Long: `Sign a CSR with a CA. The profile decides usages: server (ServerAuth),
client (ClientAuth, roles from --roles in the Organization) or impersonator
(a node's forwarding certificate). Nothing that grants authority is taken from
the CSR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var set role.Set

			if ca.Profile(profile) == ca.ProfileClient || cmd.Flags().Changed("roles") {
				var err error
				if set, err = role.Parse(roles); err != nil {
					return err
				}
			}

			return genCrt(e, caPrefix, csrPath, name+".crt", ca.Request{Profile: ca.Profile(profile), Roles: set, TTL: ttl}, force)
		},
	}

	f := cmd.Flags()
	f.StringVar(&caPrefix, "ca", "", "path prefix of the CA files PREFIX.crt and PREFIX.key (required)")
	f.StringVar(&csrPath, "csr", "", "CSR file (required)")
	f.StringVar(&name, "name", "", "path prefix of the certificate to write (required)")
	f.StringVar(&profile, "profile", string(ca.ProfileClient), "server, client or impersonator")
	f.StringSliceVar(&roles, "roles", []string{string(role.Admin)}, "roles of a client certificate")
	f.DurationVar(&ttl, "ttl", 0, "lifetime (default: the profile's, 24h for server, 8760h for client)")
	f.BoolVar(&force, "force", false, "replace an existing file")

	for _, req := range []string{"ca", "csr", "name"} {
		cmd.MarkFlagRequired(req) //nolint:errcheck // the flags exist
	}

	return cmd
}

func genCrt(e *env, caPrefix, csrPath, out string, req ca.Request, force bool) error {
	now := e.clock.Now()

	e.warnShared(caPrefix+".key", "CA key")

	issued, err := ca.SignCSRFile(caPrefix+".crt", caPrefix+".key", csrPath, req, e.clock)
	if err != nil {
		return err
	}

	if err = writeFile(out, issued.PEM, 0o644, force); err != nil {
		return err
	}

	fmt.Fprintf(e.stdout, "wrote %s (%s profile)\n", out, req.Profile)

	t := newCertTable(e.stdout, now)
	t.add(string(req.Profile), issued.Cert)
	t.flush()

	return nil
}
