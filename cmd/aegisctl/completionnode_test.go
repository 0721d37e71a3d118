package main

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
)

// fakeTokens lists one active and one revoked token.
type fakeTokens struct {
	tokens.UnimplementedTokenServiceServer
}

func (fakeTokens) List(context.Context, *tokens.ListRequest) (*tokens.ListResponse, error) {
	return &tokens.ListResponse{Messages: []*tokens.TokenList{{Tokens: []*tokens.Token{
		{Id: "w4k2zq"},
		{Id: "abc123", Revoked: timestamppb.Now()},
	}}}}, nil
}

// fakeMembers lists a control plane and two workers.
type fakeMembers struct {
	membership.UnimplementedMembershipServiceServer
}

func (fakeMembers) List(context.Context, *membership.ListRequest) (*membership.ListResponse, error) {
	return &membership.ListResponse{Messages: []*membership.Members{{Members: []*membership.Member{
		{Hostname: "cp-1", Role: "controlplane"},
		{Hostname: "worker-2", Role: "worker"},
		{Hostname: "worker-1", Role: "worker"},
	}}}}, nil
}

func TestCompletionOffersWhatTheCommandAccepts(t *testing.T) {
	c := &testCluster{pki: apidtest.NewPKI(t), config: t.TempDir() + "/aegisconfig"}
	c.nodes = append(c.nodes, apidtest.StartNode(t, c.pki, apidtest.NodeConfig{IP: "127.0.0.1", Register: func(g *grpc.Server) {
		tokens.RegisterTokenServiceServer(g, fakeTokens{})
		membership.RegisterMembershipServiceServer(g, fakeMembers{})
	}}), apidtest.StartNode(t, c.pki, apidtest.NodeConfig{IP: "127.0.0.1"}))
	c.writeConfig(t, role.Admin)

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "token IDs not revoked", args: []string{"token", "revoke", ""}, want: []string{"w4k2zq"}},
		{name: "token revoke takes one", args: []string{"token", "revoke", "w4k2zq", ""}},
		{name: "workers to remove", args: []string{"members", "remove", ""}, want: []string{"worker-1", "worker-2"}},
		{name: "unreachable: nothing", args: []string{"-e", "127.0.0.1:1", "token", "revoke", ""}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := complete(t, append([]string{"--aegisconfig", c.config}, tt.args...)...); !slices.Equal(got, tt.want) {
				t.Fatalf("completions = %q, want %q", got, tt.want)
			}
		})
	}
}
