package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/certs"
)

// Completions that ask the nodes (within completionTimeout, through the
// command's endpoints and nodes) and offer only what the command accepts.

// completeTokenID completes 'token revoke ID' with the tokens that are not
// revoked yet.
func (e *env) completeTokenID(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}

	ids, _ := e.askNodes(cmd, func(ctx context.Context, s *session) ([]string, error) {
		resp, err := tokens.NewTokenServiceClient(s.client.Conn()).List(s.nodeContext(ctx), &tokens.ListRequest{})

		var ids []string

		for _, m := range resp.GetMessages() {
			for _, t := range m.GetTokens() {
				if t.GetRevoked() == nil {
					ids = append(ids, t.GetId())
				}
			}
		}

		return ids, err
	})

	return ids, noFiles
}

// completeMemberName completes 'members remove NODE' with the hostnames of
// the workers among the members: a control plane is refused.
func (e *env) completeMemberName(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}

	names, _ := e.askNodes(cmd, func(ctx context.Context, s *session) ([]string, error) {
		resp, err := membership.NewMembershipServiceClient(s.client.Conn()).List(s.nodeContext(ctx), &membership.ListRequest{})

		var names []string

		for _, m := range resp.GetMessages() {
			for _, mb := range m.GetMembers() {
				if mb.GetRole() != string(certs.NodeControlPlane) {
					names = append(names, mb.GetHostname())
				}
			}
		}

		return names, err
	})

	return names, noFiles
}
