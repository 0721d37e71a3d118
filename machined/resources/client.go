package resources

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/logkey"
)

// reconnectDelay bounds how long a service waits before it asks machined
// again after the stream broke (machined restarting, say).
const reconnectDelay = time.Second

// Dial connects to a service socket of machined.
func Dial(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix:"+socket,
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, grpcopt.FixedWindows()...)...)
	if err != nil {
		return nil, fmt.Errorf("resources: %w", err)
	}

	return conn, nil
}

// Watch calls apply with the service's resources as machined sends them,
// reconnecting after a broken stream, until ctx ends. apply runs on Watch's
// goroutine; an error from it is logged and the previous state kept by the
// caller.
func Watch(ctx context.Context, conn *grpc.ClientConn, log *slog.Logger, apply func(*node.Resources) error) {
	client := node.NewNodeServiceClient(conn)

	watchStream(ctx, log, "node resources", func(ctx context.Context) (grpc.ServerStreamingClient[node.Resources], error) {
		return client.Watch(ctx, &node.WatchRequest{}, grpc.WaitForReady(true))
	}, apply)
}

// WatchMembers calls apply with the member list and then its changes as
// machined sends them (NodeService.WatchMembers), as Watch does. After a
// broken stream the first message is the whole list again (Full).
func WatchMembers(ctx context.Context, conn *grpc.ClientConn, log *slog.Logger, apply func(*node.MemberChanges) error) {
	client := node.NewNodeServiceClient(conn)

	watchStream(ctx, log, "member list", func(ctx context.Context) (grpc.ServerStreamingClient[node.MemberChanges], error) {
		return client.WatchMembers(ctx, &node.WatchRequest{}, grpc.WaitForReady(true))
	}, apply)
}

// watchStream opens a stream and applies its messages, again after it
// broke, until ctx ends.
func watchStream[T any](ctx context.Context, log *slog.Logger, what string,
	open func(context.Context) (grpc.ServerStreamingClient[T], error), apply func(*T) error,
) {
	for ctx.Err() == nil {
		err := watchOnce(ctx, log, what, open, apply)
		if ctx.Err() != nil {
			return
		}

		log.Warn(what+" stream ended, reconnecting", slog.String(logkey.Error, fmt.Sprint(err)))

		select {
		case <-ctx.Done():
		case <-time.After(reconnectDelay):
		}
	}
}

func watchOnce[T any](ctx context.Context, log *slog.Logger, what string,
	open func(context.Context) (grpc.ServerStreamingClient[T], error), apply func(*T) error,
) error {
	stream, err := open(ctx)
	if err != nil {
		return err
	}

	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}

		if err := apply(msg); err != nil {
			log.Warn(what+" not applied", slog.String(logkey.Error, err.Error()))
		}
	}
}

// Follow dials machined's resource socket and applies what machined sends
// (Watch) until ctx ends or stop is called. It returns once ready is closed,
// which apply does after the first complete update; when none comes within
// FirstUpdateTimeout it stops following and returns an error.
func Follow(ctx context.Context, socket string, log *slog.Logger, ready <-chan struct{}, apply func(*node.Resources) error) (stop func(), err error) {
	conn, err := Dial(socket)
	if err != nil {
		return nil, err
	}

	watchCtx, stop := context.WithCancel(ctx)

	go func() {
		Watch(watchCtx, conn, log, apply)
		conn.Close()
	}()

	wait, cancel := context.WithTimeout(ctx, FirstUpdateTimeout)
	defer cancel()

	select {
	case <-ready:
		return stop, nil
	case <-wait.Done():
		stop()

		return nil, fmt.Errorf("no resources from machined on %s: %w", socket, wait.Err())
	}
}

// FollowMembers dials machined's resource socket and applies the member
// list and its changes (WatchMembers) in the background until ctx ends.
func FollowMembers(ctx context.Context, socket string, log *slog.Logger, apply func(*node.MemberChanges) error) error {
	conn, err := Dial(socket)
	if err != nil {
		return err
	}

	go func() {
		WatchMembers(ctx, conn, log, apply)
		conn.Close()
	}()

	return nil
}
