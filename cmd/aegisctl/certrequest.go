package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/token"
)

// certRequestFlags are the flags of 'certificate request'.
type certRequestFlags struct {
	token   string
	caCert  string
	sans    []string
	out     string
	timeout time.Duration
	force   bool
}

func newCertificateRequestCommand(e *env) *cobra.Command {
	var f certRequestFlags

	cmd := &cobra.Command{
		Use:   "request ENDPOINT NAME",
		Short: "Get a node certificate from trustd with a bootstrap token, without a node",
		Long: `Get a node certificate for NAME from trustd at ENDPOINT (host or host:port,
default port 50001; comma-separated for several control planes), as a worker
does when it joins, with step's 'ca certificate' in mind: a new key of the
CA's type is made here, a CSR for NAME and the --san names is sent with the
token, and the certificate that comes back is checked against --ca-cert
before anything is written. NAME.key (mode 0600) and NAME.crt are written,
or OUT.key and OUT.crt with --out.

trustd decides what the certificate holds: a server certificate for the
names the token allows (a token's --allow-san), the caller's address
included; a name it may not carry is refused. A token that is unknown,
expired, used up or revoked is refused at once, with the reason.`,
		Example: `  aegisctl -n 127.5.0.2 token create --ttl 10m --allow-san 'edge-*.example'
  aegisctl certificate request --token w4k2zq.0123456789abcdef --ca-cert ca.crt \
      127.5.0.2 edge-1.example                          # edge-1.example.key, edge-1.example.crt
  aegisctl certificate inspect edge-1.example.crt`,
		Args: cobra.ExactArgs(2),
	}

	cmd.Flags().StringVar(&f.token, "token", "", "bootstrap token, id.secret (required)")
	cmd.Flags().StringVar(&f.caCert, "ca-cert", "", "PEM file of the OS CA that trustd's certificate chains to (required)")
	cmd.Flags().StringSliceVar(&f.sans, "san", nil, "more DNS names or IP addresses to ask for, repeatable")
	cmd.Flags().StringVar(&f.out, "out", "", "path prefix of the files to write (default: NAME)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", time.Minute, "how long to try the endpoints")
	cmd.Flags().BoolVar(&f.force, "force", false, "replace existing files")

	for _, name := range []string{"token", "ca-cert"} {
		//nolint:errcheck // the flags exist
		cmd.MarkFlagRequired(name)
	}

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return f.run(cmd.Context(), e, strings.Split(args[0], ","), args[1])
	}

	return cmd
}

func (f *certRequestFlags) run(ctx context.Context, e *env, endpoints []string, name string) error {
	prefix := f.out
	if prefix == "" {
		prefix = name
	}

	crtPath, keyPath := prefix+".crt", prefix+".key"
	if err := refuseExisting(f.force, crtPath, keyPath); err != nil {
		return err
	}

	cfg, err := f.joinConfig(e, endpoints, name)
	if err != nil {
		return err
	}

	c, err := join.New(cfg)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	res, err := c.Join(ctx)
	if err != nil {
		return fmt.Errorf("no certificate from %s: %w", strings.Join(endpoints, ","), err)
	}

	if err = writeFile(keyPath, res.KeyPEM, 0o600, f.force); err != nil {
		return err
	}

	if err = writeFile(crtPath, res.CertPEM, 0o644, f.force); err != nil {
		return err
	}

	fmt.Fprintf(e.stdout, "wrote %s and %s (%s, valid until %s, from %s)\n", keyPath, crtPath,
		subjectOf(res.Certificate), res.Certificate.NotAfter.UTC().Format(time.RFC3339), res.Endpoint)

	return nil
}

// joinConfig reads the token and the CA into a join client's config that
// makes one attempt per endpoint.
func (f *certRequestFlags) joinConfig(e *env, endpoints []string, name string) (join.Config, error) {
	tok, err := token.Parse(f.token)
	if err != nil {
		return join.Config{}, fmt.Errorf("--token: %w", err)
	}

	caPEM, err := os.ReadFile(f.caCert)
	if err != nil {
		return join.Config{}, fmt.Errorf("--ca-cert: %w", err)
	}

	cas, err := ca.ParseAcceptedSet(caPEM, e.clock.Now())
	if err != nil {
		return join.Config{}, fmt.Errorf("--ca-cert %s: %w", f.caCert, err)
	}

	return join.Config{
		Endpoints: endpoints, Token: tok, CAs: cas, CA: cas.Certificates()[0],
		Hostname: name, SANs: f.sans, MaxAttempts: len(endpoints),
		Transport: e.joinTransport, Clock: e.clock,
	}, nil
}
