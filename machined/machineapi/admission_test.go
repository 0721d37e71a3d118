package machineapi

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/machined/system/events"
)

// TestAdmissionBoundsCallsOverAllConnections: follows over two connections
// count against one bound; the call over it is refused ResourceExhausted
// naming the limit, and a follow that ends makes room again.
func TestAdmissionBoundsCallsOverAllConnections(t *testing.T) {
	const limit = 3

	sock := filepath.Join(t.TempDir(), "machined.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	// ended hears of every stream that has ended, from outside the
	// admission's interceptor: it has released the stream by then.
	ended := make(chan struct{}, limit)
	outer := grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss)
		ended <- struct{}{}

		return err
	})

	adm := NewAdmission(limit)
	g := grpc.NewServer(append([]grpc.ServerOption{outer}, adm.ServerOptions()...)...)
	New(Config{Bus: events.NewBus(16, clock.Real())}).Register(g)

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	clients := make([]machine.MachineServiceClient, 2)
	for i := range clients {
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { conn.Close() })

		clients[i] = machine.NewMachineServiceClient(conn)
	}

	cancels := make([]context.CancelFunc, 0, limit)

	for i := range limit {
		fctx, fcancel := context.WithCancel(ctx)
		cancels = append(cancels, fcancel)

		if _, err := openEvents(fctx, clients[i%2]); err != nil {
			t.Fatalf("follow %d: %v", i, err)
		}
	}

	_, err = openEvents(ctx, clients[1])
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit 3") {
		t.Fatalf("follow over the bound: %v", err)
	}

	if _, err := clients[0].Version(ctx, &emptypb.Empty{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Version over the bound: %v", err)
	}

	<-ended // the refused follow

	cancels[0]()

	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the cancelled follow did not end")
	}

	if adm.Open() != limit-1 {
		t.Fatalf("%d calls open, want %d", adm.Open(), limit-1)
	}

	if _, err := openEvents(ctx, clients[1]); err != nil {
		t.Fatalf("follow after one ended: %v", err)
	}
}

func openEvents(ctx context.Context, c machine.MachineServiceClient) (machine.MachineService_EventsClient, error) {
	s, err := c.Events(ctx, &machine.EventsRequest{})
	if err != nil {
		return nil, err
	}

	_, err = s.Recv()

	return s, err
}
