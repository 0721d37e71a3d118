package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// newClient connects to etcd at endpoints with machined's client certificate.
func (e *Etcd) newClient(endpoints ...string) (*clientv3.Client, error) {
	// The files must be there: a client made before would fail each
	// handshake until they are, where clientv3 hides the cause.
	if _, err := e.clientFiles().Config(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: dialTimeout,
		DialOptions: []grpc.DialOption{e.clientFiles().DialOption(), grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: reconnectBase, Multiplier: backoff.DefaultConfig.Multiplier, Jitter: backoff.DefaultConfig.Jitter, MaxDelay: reconnectMax},
			MinConnectTimeout: dialTimeout,
		})},
		DialKeepAliveTime: keepAlive, DialKeepAliveTimeout: keepAliveTimeout,
		Logger: zap.NewNop(), RejectOldCluster: false,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client: %w", err)
	}

	return cli, nil
}

// local returns the client of the local member, made on first use and kept
// for the boot: it reconnects by itself after a restart of the member.
func (e *Etcd) local() (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()

	if e.client != nil {
		return e.client, nil
	}

	cli, err := e.newClient(e.ClientURL())
	if err != nil {
		return nil, err
	}

	e.client = cli

	return cli, nil
}

// Client returns a client of every control plane's member, the local one
// first, for the cluster state kept in etcd (membership, the revocation
// list); the caller does not close it. It goes on
// answering while the local member is stopped, as long as the others
// keep quorum. It is made on first use and kept for the boot.
func (e *Etcd) Client() (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()

	if e.cluster != nil {
		return e.cluster, nil
	}

	cli, err := e.newClient(append([]string{e.ClientURL()}, e.peerEndpoints()...)...)
	if err != nil {
		return nil, err
	}

	e.cluster = cli

	return cli, nil
}

// withLocal runs fn with the local member's client under callTimeout and
// translates etcd's errors into the package's.
func (e *Etcd) withLocal(ctx context.Context, fn func(ctx context.Context, cli *clientv3.Client) error) error {
	cli, err := e.local()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	return translate(fn(ctx, cli))
}

// translate maps etcd's errors to the package's, keeping the cause.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrMemberNotFound):
		return fmt.Errorf("%w: %w", ErrMemberNotFound, err)
	case errors.Is(err, rpctypes.ErrUnhealthy):
		return fmt.Errorf("%w: %w", ErrQuorum, err)
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.Unavailable,
		status.Code(err) == codes.DeadlineExceeded:
		return fmt.Errorf("%w: %w", ErrNotRunning, err)
	default:
		return err
	}
}
