package resources

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/node"
)

func serve(t *testing.T, store *Store, view View, log *slog.Logger) *grpc.ClientConn {
	t.Helper()

	sock := filepath.Join(t.TempDir(), "svc.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer(DenyOthers(sock, log))
	node.RegisterNodeServiceServer(g, NewServer(store, view, nil))

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	conn, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return conn
}

// TestViewsHideWhatAServiceMayNotRead: apid never sees the CA key or the
// token; trustd never sees the impersonator key.
func TestViewsHideWhatAServiceMayNotRead(t *testing.T) {
	store := NewStore()
	store.Update(func(r *node.Resources) {
		r.Server = &node.KeyPair{Crt: []byte("server-crt"), Key: []byte("server-key")}
		r.Impersonator = &node.KeyPair{Crt: []byte("imp-crt"), Key: []byte("imp-key")}
		r.OsCa = &node.KeyPair{Crt: []byte("ca-crt"), Key: []byte("ca-key")}
		r.TrustdToken = "abcdef.0123456789abcdef"
		r.PreviousTrustdTokens = []*node.PreviousToken{{Token: "prevtk.0123456789abcdef"}}
		r.Addresses = []string{"127.5.0.2"}
		r.Time = &node.TimeStatus{Synced: true}
	})

	all, _ := store.Current()

	apid := APIDView(all)
	if apid.GetOsCa() != nil || apid.GetTrustdToken() != "" || len(apid.GetPreviousTrustdTokens()) != 0 || apid.GetTime() != nil ||
		string(apid.GetImpersonator().GetKey()) != "imp-key" {
		t.Fatalf("apid view = %v", apid)
	}

	trustd := TrustdView(all)
	if trustd.GetImpersonator() != nil || len(trustd.GetAddresses()) != 0 || string(trustd.GetOsCa().GetKey()) != "ca-key" ||
		len(trustd.GetPreviousTrustdTokens()) != 1 {
		t.Fatalf("trustd view = %v", trustd)
	}
}

func TestWatchSendsChangesOfTheView(t *testing.T) {
	store := NewStore()
	conn := serve(t, store, APIDView, slog.New(slog.DiscardHandler))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	got := make(chan *node.Resources, 10)

	go Watch(ctx, conn, slog.New(slog.DiscardHandler), func(r *node.Resources) error {
		got <- r

		return nil
	})

	first := <-got
	if len(first.GetAddresses()) != 0 {
		t.Fatalf("first = %v", first)
	}

	// A change outside the view is not sent; one inside it is.
	store.Update(func(r *node.Resources) { r.TrustdToken = "abcdef.0123456789abcdef" })
	store.Update(func(r *node.Resources) { r.Addresses = []string{"127.5.0.3"} })

	select {
	case r := <-got:
		if len(r.GetAddresses()) != 1 || r.GetAddresses()[0] != "127.5.0.3" {
			t.Fatalf("update = %v", r)
		}
	case <-ctx.Done():
		t.Fatal("no update")
	}

	select {
	case r := <-got:
		t.Fatalf("unexpected extra update %v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestOtherMethodsAreDeniedAndLogged(t *testing.T) {
	var buf bytes.Buffer

	conn := serve(t, NewStore(), TrustdView, slog.New(slog.NewTextHandler(&buf, nil)))

	_, err := machine.NewMachineServiceClient(conn).Version(context.Background(), &emptypb.Empty{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Version on a service socket: %v", err)
	}

	if !strings.Contains(buf.String(), machine.MachineService_Version_FullMethodName) {
		t.Fatalf("denial not logged: %q", buf.String())
	}
}
