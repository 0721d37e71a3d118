package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/serial"
)

func newConfigRevokeCommand(e *env) *cobra.Command {
	var (
		ofContext, reason, notAfter string
	)

	cmd := &cobra.Command{
		Use:   "revoke [SERIAL]",
		Short: "Revoke a client certificate on every node of the cluster (admin only)",
		Long: `Record a client certificate's serial in the cluster's revocation list (in etcd,
through a control-plane endpoint). Every apid of the cluster then refuses the
certificate, at the handshake and on the open connections' next call, and
ends the streams it holds; a revoked certificate is never renewed. The
revocation covers every certificate renewed from the one named ('aegisctl
config renew'), however many renewals down, but not the one it was renewed
from: the reply says how many certificates it covers and lists the renewed
ones. Each entry leaves the list when its certificate expires.

Name the certificate by its serial (hexadecimal, as 'openssl x509 -serial'
prints it), by a context of the client config (--of-context), or give
neither to revoke the certificate of the context in use (--context, or the
current one). Revoking the certificate the call is made with is allowed, and
warned about: the context cannot be used afterwards.

On a control plane without etcd quorum the revocation fails (Unavailable) and
nothing is recorded; every apid keeps enforcing the list it has.`,
		Example: `  aegisctl config revoke 5f3a09c2e1d4b7a8 --reason "laptop lost"
  aegisctl config revoke --of-context ci          # ci's certificate, with the current context
  aegisctl config revoke --context leaked         # leaked's own certificate, with itself`,
		Args: cobra.MaximumNArgs(1),
	}

	format := addOutputFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&ofContext, "of-context", "", "revoke the client certificate of this context of the client config")
	f.StringVar(&reason, "reason", "", "why, recorded with the revocation (one line)")
	f.StringVar(&notAfter, "not-after", "", "expiry of the certificate named by SERIAL (RFC 3339); default: the longest a client certificate may live")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 && ofContext != "" {
			return errors.New("give a SERIAL or --of-context, not both")
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			req, target, err := revokeRequest(e, s, args, ofContext, notAfter)
			if err != nil {
				return err
			}

			req.Reason = reason

			if target == s.cert.SerialNumber.Text(16) {
				fmt.Fprintf(e.stderr, "warning: revoking the client certificate of context %q, which this command uses: its next call will be refused\n", s.name)
			}

			resp, err := revocations.NewRevocationServiceClient(s.client.Conn()).Revoke(ctx, req)
			if err != nil {
				return s.explain(err)
			}

			own := s.cert.SerialNumber.Text(16)
			for _, m := range resp.GetMessages() {
				if slices.ContainsFunc(m.GetDescendants(), func(d *revocations.Revocation) bool { return d.GetSerial() == own }) {
					fmt.Fprintf(e.stderr, "warning: the client certificate of context %q, which this command uses, was renewed from %s and is revoked with it\n", s.name, target)
				}
			}

			return printReply(e.stdout, *format, resp, false, func(w io.Writer) { revokedTable(w, resp, e.clock.Now()) })
		})
	}

	return cmd
}

// revokeRequest names the certificate to revoke: SERIAL, the certificate
// of --of-context, or the session's own. It returns the request and the
// serial in the list's form.
func revokeRequest(e *env, s *session, args []string, ofContext, notAfter string) (*revocations.RevokeRequest, string, error) {
	var cert *x509.Certificate

	switch {
	case len(args) == 1:
		sn, err := serial.Parse(args[0])
		if err != nil {
			return nil, "", err
		}

		req := &revocations.RevokeRequest{Serial: sn}

		if notAfter != "" {
			t, err := time.Parse(time.RFC3339, notAfter)
			if err != nil {
				return nil, "", fmt.Errorf("--not-after: %w", err)
			}

			req.NotAfter = timestamppb.New(t)
		}

		return req, sn, nil
	case ofContext != "":
		cfg, err := certs.LoadClientConfig(s.path)
		if err != nil {
			return nil, "", err
		}

		c, ok := cfg.Contexts[ofContext]
		if !ok {
			return nil, "", noContext(ofContext, cfg)
		}

		if cert, err = ca.ParseCertificate(c.Crt); err != nil {
			return nil, "", fmt.Errorf("context %q: client certificate: %w", ofContext, err)
		}
	default:
		cert = s.cert
	}

	if notAfter != "" {
		return nil, "", errors.New("--not-after goes with SERIAL: a context's certificate says when it expires")
	}

	sn := serial.Of(cert.SerialNumber)

	return &revocations.RevokeRequest{Serial: sn, NotAfter: timestamppb.New(cert.NotAfter)}, sn, nil
}

func revokedTable(w io.Writer, resp *revocations.RevokeResponse, now time.Time) {
	for _, m := range resp.GetMessages() {
		if f := failureOf(m.GetMetadata()); f != nil {
			fmt.Fprintf(w, "error:\t%s\n", f.text)

			continue
		}

		r := m.GetRevocation()
		fmt.Fprintf(w, "revoked:\t%s\n", r.GetSerial())
		fmt.Fprintf(w, "expires:\t%s\n", when(r.GetNotAfter().AsTime(), now))
		fmt.Fprintf(w, "revoked at:\t%s\n", r.GetRevokedAt().AsTime().UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "revoked by:\t%s\n", r.GetRevokedBy())

		if r.GetReason() != "" {
			fmt.Fprintf(w, "reason:\t%s\n", r.GetReason())
		}

		fmt.Fprintf(w, "covers:\t%s\n", coverage(len(m.GetDescendants())))

		for _, d := range m.GetDescendants() {
			fmt.Fprintf(w, "renewed from it:\t%s, expires %s\n", d.GetSerial(), when(d.GetNotAfter().AsTime(), now))
		}
	}
}

// coverage says how many certificates a revocation covers: the one named
// and those renewed from it.
func coverage(descendants int) string {
	switch descendants {
	case 0:
		return "1 certificate (none was renewed from it)"
	case 1:
		return "2 certificates (it and 1 renewed from it)"
	}

	return fmt.Sprintf("%d certificates (it and %d renewed from it)", descendants+1, descendants)
}

func newConfigRevocationsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revocations",
		Short: "List the revoked client certificates not yet expired (admin only)",
		Long: `List the cluster's revocation list: from etcd on a control-plane endpoint, and
the copy the node enforces on a worker (-n WORKER).`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*revocations.ListResponse]{
			call: func(ctx context.Context, c *client.Client) (*revocations.ListResponse, error) {
				return revocations.NewRevocationServiceClient(c.Conn()).List(ctx, &revocations.ListRequest{})
			},
			table: func(w io.Writer, r *revocations.ListResponse, named bool) {
				revocationsTable(w, r, named, e.clock.Now())
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

func revocationsTable(w io.Writer, resp *revocations.ListResponse, named bool, now time.Time) {
	header(w, named, "SERIAL\tEXPIRES\tREVOKED AT\tREVOKED BY\tREASON")

	eachNode(w, resp.GetMessages(), func(m *revocations.RevocationList) {
		for _, r := range m.GetRevocations() {
			at := "-"
			if r.GetRevokedAt() != nil {
				at = r.GetRevokedAt().AsTime().UTC().Format(time.RFC3339)
			}

			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				r.GetSerial(), when(r.GetNotAfter().AsTime(), now), at, orDash(r.GetRevokedBy()), r.GetReason())
		}
	})
}
