package node

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/testutil"
)

type fakeTokens struct {
	tokens.UnimplementedTokenServiceServer
}

func (fakeTokens) List(context.Context, *tokens.ListRequest) (*tokens.ListResponse, error) {
	return &tokens.ListResponse{}, nil
}

// TestTokenSocketWaits: a token call that arrives while trustd's socket is
// not up waits for it (trustd restarting), and one that finds no trustd
// within the bound is Unavailable with a message that names no path; once
// machined begins to end, nothing waits (a waiting call would hold apid's
// stop).
func TestTokenSocketWaits(t *testing.T) {
	path := filepath.Join(testutil.ShortTempDir(t), "tokens.sock")

	conn, err := dialTokenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	t.Run("no trustd within the bound", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()

		err := ready(ctx, conn, nil)
		if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "trustd") {
			t.Fatalf("ready with no trustd: %v, want Unavailable naming trustd and no path", err)
		}
	})

	t.Run("machined ending while a call waits", func(t *testing.T) {
		ending := make(chan struct{})
		errc := make(chan error, 1)
		began := time.Now()

		go func() { errc <- ready(context.Background(), conn, ending) }()

		time.Sleep(100 * time.Millisecond)
		close(ending)

		select {
		case err := <-errc:
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "stopping") {
				t.Fatalf("ready as machined ends: %v, want Unavailable saying the node is stopping", err)
			}
		case <-time.After(trustdWait - time.Second):
			t.Fatalf("ready still waiting %s after machined began to end, want it refused at once", time.Since(began).Round(time.Millisecond))
		}

		if err := ready(context.Background(), conn, ending); status.Code(err) != codes.Unavailable {
			t.Fatalf("a call after machined began to end: %v, want Unavailable at once", err)
		}
	})

	t.Run("trustd that comes up in time", func(t *testing.T) {
		srv := grpc.NewServer()
		tokens.RegisterTokenServiceServer(srv, fakeTokens{})
		t.Cleanup(srv.Stop)

		go func() {
			time.Sleep(500 * time.Millisecond)

			lis, err := net.Listen("unix", path)
			if err != nil {
				t.Error(err)

				return
			}

			_ = srv.Serve(lis) //nolint:errcheck // ends with Stop
		}()

		began := time.Now()

		if err := ready(context.Background(), conn, nil); err != nil {
			t.Fatalf("ready with trustd up after 500 ms: %v", err)
		}

		if _, err := tokens.NewTokenServiceClient(conn).List(context.Background(), &tokens.ListRequest{}); err != nil {
			t.Fatal(err)
		}

		t.Logf("served %s after the call came", time.Since(began).Round(time.Millisecond))
	})
}
