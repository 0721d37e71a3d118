package resources

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/node"
)

// listen serves store's APIDView, and members unless nil, on a new socket
// and returns its path.
func listen(t *testing.T, store *Store, members *Members) string {
	t.Helper()

	sock := filepath.Join(t.TempDir(), "svc.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer()
	node.RegisterNodeServiceServer(g, NewServer(store, APIDView, members))

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	return sock
}

// TestFollowReturnsAtTheFirstCompleteUpdate: Follow waits past an
// incomplete update until apply says the resources are complete.
func TestFollowReturnsAtTheFirstCompleteUpdate(t *testing.T) {
	store := NewStore()
	sock := listen(t, store, nil)

	ready := make(chan struct{})

	var once sync.Once

	apply := func(r *node.Resources) error {
		if len(r.GetAddresses()) == 0 {
			return errors.New("incomplete")
		}

		once.Do(func() { close(ready) })

		return nil
	}

	go store.Update(func(r *node.Resources) { r.Addresses = []string{"127.5.0.3"} })

	stop, err := Follow(context.Background(), sock, slog.New(slog.DiscardHandler), ready, apply)
	if err != nil {
		t.Fatal(err)
	}

	stop()
}

// TestFollowGivesUpNamingTheSocket: without a complete update Follow
// returns an error that names the socket once its context ends.
func TestFollowGivesUpNamingTheSocket(t *testing.T) {
	sock := listen(t, NewStore(), nil)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()

	_, err := Follow(ctx, sock, slog.New(slog.DiscardHandler), make(chan struct{}), func(*node.Resources) error {
		return errors.New("incomplete")
	})
	if err == nil || !strings.Contains(err.Error(), "no resources from machined on "+sock) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Follow = %v", err)
	}
}
