package node

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/grpcopt"
)

// tokenProxy serves the TokenService by forwarding each call to trustd,
// which owns the token store, over its token socket. Workers run no trustd:
// there the service answers FailedPrecondition.
type tokenProxy struct {
	tokens.UnimplementedTokenServiceServer

	n    *Node
	conn *grpc.ClientConn
}

func newTokenProxy(n *Node) (*tokenProxy, error) {
	conn, err := grpc.NewClient("unix:"+n.layout.TokensSocket(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, grpcopt.FixedWindows()...)...)
	if err != nil {
		return nil, err
	}

	return &tokenProxy{n: n, conn: conn}, nil
}

func (p *tokenProxy) close() { p.conn.Close() } //nolint:errcheck // local socket

func (p *tokenProxy) client() (tokens.TokenServiceClient, error) {
	if !p.n.config.current().Machine.Type.IsControlPlane() {
		return nil, status.Error(codes.FailedPrecondition, "tokens are kept by trustd on control-plane nodes; ask one of them")
	}

	return tokens.NewTokenServiceClient(p.conn), nil
}

// Create forwards to trustd.
func (p *tokenProxy) Create(ctx context.Context, req *tokens.CreateRequest) (*tokens.CreateResponse, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}

	return c.Create(ctx, req)
}

// List forwards to trustd.
func (p *tokenProxy) List(ctx context.Context, req *tokens.ListRequest) (*tokens.ListResponse, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}

	return c.List(ctx, req)
}

// Revoke forwards to trustd.
func (p *tokenProxy) Revoke(ctx context.Context, req *tokens.RevokeRequest) (*tokens.RevokeResponse, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}

	return c.Revoke(ctx, req)
}
