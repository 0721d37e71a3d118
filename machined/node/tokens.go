package node

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
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

// trustdWait bounds how long a token call waits for trustd's socket: a
// trustd that restarts (a version switch, a service restart) serves again
// within a second or two, and the call then goes through instead of
// failing; one that stays down is refused after this long.
const trustdWait = 5 * time.Second

// tokenSocketBackoff paces reconnects to trustd's socket: a local socket
// is back within moments of trustd, so waits stay short (gRPC's default
// grows to two minutes).
var tokenSocketBackoff = backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

func newTokenProxy(n *Node) (*tokenProxy, error) {
	conn, err := dialTokenSocket(n.layout.TokensSocket())
	if err != nil {
		return nil, err
	}

	return &tokenProxy{n: n, conn: conn}, nil
}

func dialTokenSocket(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix:"+path, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: tokenSocketBackoff, MinConnectTimeout: time.Second}),
	}, grpcopt.FixedWindows()...)...)
}

// ready waits, within ctx and trustdWait, until the connection to trustd's
// socket is up, and no longer once ending is closed. A trustd that does not
// come up in time is Unavailable, in words that name no local path.
func ready(ctx context.Context, conn *grpc.ClientConn, ending <-chan struct{}) error {
	// While machined ends, its trustd is stopped and does not come back in
	// this process; a call that waited would hold apid's own stop, and
	// with it the node's API, for trustdWait.
	errEnding := status.Error(codes.Unavailable,
		"machined: trustd does not serve tokens on this node now (the node is stopping or switching version); try again")

	select {
	case <-ending:
		return errEnding
	default:
	}

	ctx, cancel := context.WithTimeout(ctx, trustdWait)
	defer cancel()

	// The wait ends with machined too.
	go func() {
		select {
		case <-ending:
			cancel()
		case <-ctx.Done():
		}
	}()

	conn.Connect()

	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return nil
		}

		if !conn.WaitForStateChange(ctx, st) {
			select {
			case <-ending:
				return errEnding
			default:
				return status.Error(codes.Unavailable, "machined: trustd does not serve tokens on this node now (it is starting or stopped); try again")
			}
		}
	}
}

func (p *tokenProxy) close() { p.conn.Close() } //nolint:errcheck // local socket

func (p *tokenProxy) client() (tokens.TokenServiceClient, error) {
	if !p.n.config.current().Machine.Type.IsControlPlane() {
		return nil, status.Error(codes.FailedPrecondition, "tokens are kept by trustd on control-plane nodes; ask one of them")
	}

	return tokens.NewTokenServiceClient(p.conn), nil
}

// call makes a token call once trustd's socket is up.
func call[Req, Resp any](ctx context.Context, p *tokenProxy, req Req,
	method func(tokens.TokenServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	var zero Resp

	c, err := p.client()
	if err != nil {
		return zero, err
	}

	if err := ready(ctx, p.conn, p.n.ending); err != nil {
		return zero, err
	}

	return method(c, ctx, req)
}

// Create forwards to trustd.
func (p *tokenProxy) Create(ctx context.Context, req *tokens.CreateRequest) (*tokens.CreateResponse, error) {
	return call(ctx, p, req, tokens.TokenServiceClient.Create)
}

// List forwards to trustd.
func (p *tokenProxy) List(ctx context.Context, req *tokens.ListRequest) (*tokens.ListResponse, error) {
	return call(ctx, p, req, tokens.TokenServiceClient.List)
}

// Revoke forwards to trustd.
func (p *tokenProxy) Revoke(ctx context.Context, req *tokens.RevokeRequest) (*tokens.RevokeResponse, error) {
	return call(ctx, p, req, tokens.TokenServiceClient.Revoke)
}
