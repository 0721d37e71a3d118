package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/token"
)

func newGenCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate secrets, configs, CAs, keys, CSRs and certificates",
	}

	cmd.AddCommand(
		newGenSecretsCommand(e),
		newGenConfigCommand(e),
		newGenCACommand(e),
		newGenKeyCommand(e),
		newGenCSRCommand(e),
		newGenCrtCommand(e),
	)

	return cmd
}

func newGenSecretsCommand(e *env) *cobra.Command {
	var (
		out     string
		force   bool
		keyType string
	)

	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Generate a secrets bundle (Talos secrets.yaml layout)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kt, err := ca.ParseKeyType(keyType)
			if err != nil {
				return err
			}

			if err = refuseExisting(force, out); err != nil {
				return err
			}

			b, err := certs.GenerateBundle(certs.BundleOptions{OSKeyType: kt, Clock: e.clock})
			if err != nil {
				return err
			}

			if err = b.Save(out, force); err != nil {
				return err
			}

			fmt.Fprintf(e.stdout, "wrote %s (mode 0600)\n", out)

			return printBundle(e, b)
		},
	}

	cmd.Flags().StringVarP(&out, "output", "o", "secrets.yaml", "file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	cmd.Flags().StringVar(&keyType, "key-type", string(ca.Ed25519), "key type of the OS CA: ed25519 or ecdsa-p256")

	return cmd
}

func newGenConfigCommand(e *env) *cobra.Command {
	var (
		opts        certs.ConfigOptions
		withSecrets string
		outDir      string
		force       bool
		crtTTL      time.Duration
		joinToken   string
	)

	cmd := &cobra.Command{
		Use:   "config CLUSTER ENDPOINT",
		Short: "Generate controlplane.yaml, worker.yaml and aegisconfig for a cluster",
		Long: `Generate the machine configs of a control plane and of a worker, and a client
config holding an os:admin certificate. ENDPOINT is the control plane's address
(host name or IP, no port): workers join through trustd on port 50001 there and
clients reach apid on port 50000.

Without --with-secrets a new secrets bundle is generated and written beside the
configs as secrets.yaml; keep it to make more configs for the same cluster.

With --token, worker.yaml joins with that token, one made with 'aegisctl token
create' (limited to some names, expiring), instead of the cluster's static
token; controlplane.yaml keeps the static one. The worker renews through
trustd with it too, so it must stay valid while the worker runs. A stored
token belongs to a running cluster, so --token needs --with-secrets.`,
		Example: `  aegisctl gen config demo 10.5.0.2 --time-server pool.ntp.org
  aegisctl gen config demo cp.example --with-secrets secrets.yaml -o demo/
  aegisctl gen config local 127.5.0.2 --trust-host-clock
  aegisctl gen config demo 10.5.0.2 --with-secrets secrets.yaml -o w7/ --token w4k2zq.0123456789abcdef`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ClusterName, opts.Endpoint = args[0], args[1]

			if joinToken != "" && withSecrets == "" {
				return errors.New("--token is a token of a running cluster: give that cluster's secrets with --with-secrets")
			}

			return genConfig(e, opts, withSecrets, outDir, crtTTL, force, joinToken)
		},
	}

	f := cmd.Flags()
	f.StringVar(&withSecrets, "with-secrets", "", "secrets bundle to use (default: generate one)")
	f.StringVarP(&outDir, "output-dir", "o", ".", "directory to write the files to")
	f.BoolVar(&force, "force", false, "replace existing files")
	f.StringSliceVar(&opts.TimeServers, "time-server", []string{"time.cloudflare.com"}, "NTP servers (host or host:port), repeatable")
	f.BoolVar(&opts.TrustHostClock, "trust-host-clock", false, "trust the host clock instead of NTP (local clusters on one machine)")
	f.StringSliceVar(&opts.CertSANs, "cert-sans", nil, "extra names and addresses for node certificates")
	f.StringVar(&joinToken, "token", "", "token worker.yaml joins with, from 'token create' (default: the cluster's static token)")
	f.DurationVar(&crtTTL, "crt-ttl", ca.DefaultsFor(ca.ProfileClient).TTL, "lifetime of the admin client certificate")

	return cmd
}

func genConfig(e *env, opts certs.ConfigOptions, withSecrets, outDir string, crtTTL time.Duration, force bool, joinToken string) error {
	if _, _, err := net.SplitHostPort(opts.Endpoint); err == nil {
		return fmt.Errorf("ENDPOINT %q: give the address without a port (trustd is on %d, apid on %d)", opts.Endpoint, wire.TrustdPort, wire.APIDPort)
	}

	if err := certs.CheckHostPort(opts.Endpoint); err != nil {
		return fmt.Errorf("ENDPOINT: %w", err)
	}

	now := e.clock.Now()

	b, generated, err := loadOrGenerateBundle(e, withSecrets, now)
	if err != nil {
		return err
	}

	set, err := certs.GenerateClusterConfigs(b, opts, crtTTL, now)
	if err != nil {
		return err
	}

	if generated {
		set.Secrets = b
	}

	if joinToken != "" {
		tok, err := token.Parse(joinToken)
		if err != nil {
			return fmt.Errorf("--token: %w", err)
		}

		set.Worker.Machine.Token = tok.Reveal()
	}

	files, err := set.Files(outDir)
	if err != nil {
		return err
	}

	if err = writeAll(files, force); err != nil {
		return err
	}

	for _, f := range files {
		fmt.Fprintf(e.stdout, "wrote %s (mode %04o)\n", f.Name, f.Mode)
	}

	return printContext(e, set.Client.Context, set.Client.Contexts[set.Client.Context])
}

// writeAll writes every file or, if one fails, removes those it wrote. All
// targets are checked first, so a clash leaves nothing behind.
func writeAll(files []certs.ConfigFile, force bool) error {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Name
	}

	if err := refuseExisting(force, paths...); err != nil {
		return err
	}

	for i, f := range files {
		if err := writeFile(f.Name, f.Data, f.Mode, force); err != nil {
			if !force {
				for _, done := range files[:i] {
					os.Remove(done.Name) //nolint:errcheck // undoing our own fresh files
				}
			}

			return err
		}
	}

	return nil
}

func loadOrGenerateBundle(e *env, path string, now time.Time) (*certs.Bundle, bool, error) {
	if path != "" {
		e.warnShared(path, "secrets bundle")

		b, err := certs.LoadBundle(path, now)

		return b, false, err
	}

	b, err := certs.GenerateBundle(certs.BundleOptions{Clock: e.clock})

	return b, true, err
}

func printBundle(e *env, b *certs.Bundle) error {
	t := newCertTable(e.stdout, e.clock.Now())

	for _, c := range []struct {
		what string
		pair *certs.CertAndKey
	}{
		{"os CA", b.Certs.OS},
		{"etcd CA", b.Certs.Etcd},
		{"kubernetes CA", b.Certs.K8s},
		{"aggregator CA", b.Certs.K8sAggregator},
	} {
		cert, err := ca.ParseCertificate(c.pair.Crt)
		if err != nil {
			return err
		}

		t.add(c.what, cert)
	}

	t.flush()

	return nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)

	return err == nil
}
