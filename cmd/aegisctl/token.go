package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/tokens"
)

func newTokenCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the bootstrap tokens of trustd (admin only)",
		Long: `Create, list and revoke the bootstrap tokens trustd keeps on a control plane,
through the endpoint's own node (or the nodes named with -n). Workers present
a token to trustd to join.`,
	}

	cmd.AddCommand(newTokenCreateCommand(e), newTokenListCommand(e), newTokenRevokeCommand(e), newTokenRotateStaticCommand(e))

	return cmd
}

func newTokenCreateCommand(e *env) *cobra.Command {
	var req tokens.CreateRequest

	var ttl time.Duration

	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print it, the only time it is shown",
		Args:  cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "lifetime of the token (0: the node's default, a day)")
	f.Uint32Var(&req.MaxUses, "uses", 0, "how many nodes may join with it (1: single-use, 0: no limit)")
	f.StringSliceVar(&req.AllowedSans, "allow-san", nil, "names a certificate obtained with it may carry: DNS patterns (node-*.example) or IP CIDRs, repeatable")
	f.StringVar(&req.Description, "description", "", "what the token is for")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if ttl < 0 {
			return fmt.Errorf("--ttl %s is negative", ttl)
		}

		if ttl > 0 {
			req.Ttl = durationpb.New(ttl)
		}

		req.AllowedSans = splitList(req.AllowedSans)

		return unaryCommand[*tokens.CreateResponse]{
			call: func(ctx context.Context, c *client.Client) (*tokens.CreateResponse, error) {
				return tokens.NewTokenServiceClient(c.Conn()).Create(ctx, &req)
			},
			table: func(w io.Writer, r *tokens.CreateResponse, named bool) { createdTable(w, r, named, e.clock.Now()) },
		}.run(e, cmd, *format)
	}

	return cmd
}

// createdTable shows each new token with what it allows.
func createdTable(w io.Writer, resp *tokens.CreateResponse, named bool, now time.Time) {
	for _, m := range resp.GetMessages() {
		if named {
			fmt.Fprintf(w, "node:\t%s\n", m.GetMetadata().GetHostname())
		}

		if f := failureOf(m.GetMetadata()); f != nil {
			fmt.Fprintf(w, "error:\t%s\n", f.text)

			continue
		}

		info := m.GetInfo()
		fmt.Fprintf(w, "token:\t%s\n", m.GetToken())
		fmt.Fprintf(w, "id:\t%s\n", info.GetId())
		fmt.Fprintf(w, "expires:\t%s\n", when(info.GetExpires().AsTime(), now))
		fmt.Fprintf(w, "uses:\t%s\n", usesText(info))
		fmt.Fprintf(w, "allowed SANs:\t%s\n", orAny(info.GetAllowedSans()))

		if d := info.GetDescription(); d != "" {
			fmt.Fprintf(w, "description:\t%s\n", d)
		}
	}

	fmt.Fprintln(w, "\nKeep the token now: it is not shown again.")
}

func newTokenListCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens, without their secrets",
		Args:  cobra.NoArgs,
	}

	format := addWideOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*tokens.ListResponse]{
			call: func(ctx context.Context, c *client.Client) (*tokens.ListResponse, error) {
				return tokens.NewTokenServiceClient(c.Conn()).List(ctx, &tokens.ListRequest{})
			},
			table: func(w io.Writer, r *tokens.ListResponse, named bool) {
				tokenListTable(w, r, named, e.clock.Now(), false)
			},
			wide: func(w io.Writer, r *tokens.ListResponse, named bool) {
				tokenListTable(w, r, named, e.clock.Now(), true)
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

// tokenListTable lists the tokens; the wide form adds when each was
// created and revoked, as times.
func tokenListTable(w io.Writer, resp *tokens.ListResponse, named bool, now time.Time, wide bool) {
	cols := "ID\tSTATE\tUSES\tEXPIRES\tALLOWED SANS\tDESCRIPTION"
	if wide {
		cols += "\tCREATED\tREVOKED"
	}

	header(w, named, cols)

	eachNode(w, resp.GetMessages(), func(m *tokens.TokenList) {
		for _, t := range m.GetTokens() {
			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t%s", nodeCell(named, m.GetMetadata().GetHostname()),
				t.GetId(), tokenState(t, now), usesText(t), when(t.GetExpires().AsTime(), now),
				orAny(t.GetAllowedSans()), t.GetDescription())

			if wide {
				fmt.Fprintf(w, "\t%s\t%s", t.GetCreated().AsTime().UTC().Format(time.RFC3339), revokedAt(t))
			}

			fmt.Fprintln(w)
		}
	})
}

// revokedAt is when t was revoked, or "-".
func revokedAt(t *tokens.Token) string {
	if t.GetRevoked() == nil {
		return "-"
	}

	return t.GetRevoked().AsTime().UTC().Format(time.RFC3339)
}

func newTokenRevokeCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token at once; it stays listed",
		Example: `  aegisctl token list                 # the IDs
  aegisctl token revoke abc123`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeTokenID,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return unaryCommand[*tokens.RevokeResponse]{
			call: func(ctx context.Context, c *client.Client) (*tokens.RevokeResponse, error) {
				return tokens.NewTokenServiceClient(c.Conn()).Revoke(ctx, &tokens.RevokeRequest{Id: args[0]})
			},
			table: func(w io.Writer, r *tokens.RevokeResponse, named bool) {
				header(w, named, "RESPONSE")

				eachNode(w, r.GetMessages(), func(m *tokens.Revoked) {
					fmt.Fprintf(w, "%stoken %s revoked\n", nodeCell(named, m.GetMetadata().GetHostname()), m.GetInfo().GetId())
				})
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

func tokenState(t *tokens.Token, now time.Time) string {
	switch {
	case t.GetRevoked() != nil:
		return "revoked"
	case !now.Before(t.GetExpires().AsTime()):
		return "expired"
	case t.GetMaxUses() > 0 && t.GetUses() >= t.GetMaxUses():
		return "used up"
	default:
		return "active"
	}
}

func usesText(t *tokens.Token) string {
	if t.GetMaxUses() == 0 {
		return fmt.Sprintf("%d (no limit)", t.GetUses())
	}

	return fmt.Sprintf("%d of %d", t.GetUses(), t.GetMaxUses())
}

// when renders a time with how far it is from now.
func when(t, now time.Time) string {
	date := t.UTC().Format("2006-01-02 15:04 MST")
	if d := t.Sub(now); d >= 0 {
		return fmt.Sprintf("%s (in %s)", date, d.Round(time.Minute))
	}

	return fmt.Sprintf("%s (%s ago)", date, now.Sub(t).Round(time.Minute))
}

func orAny(sans []string) string {
	if len(sans) == 0 {
		return "(any)"
	}

	return strings.Join(sans, ",")
}
