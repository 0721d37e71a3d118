package upgrade

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
)

func TestLeaseOneHolderAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e, _ := etcdtest.Start(t)

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	if err := AcquireLease(ctx, cli, "cp1", time.Minute); err != nil {
		t.Fatal(err)
	}

	if err := AcquireLease(ctx, cli, "cp1", time.Minute); err != nil {
		t.Fatalf("taking it again: %v", err)
	}

	err = AcquireLease(ctx, cli, "cp2", time.Minute)
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "cp1 holds") {
		t.Fatalf("a second holder: %v", err)
	}

	if err := ReleaseLease(ctx, cli, "cp2"); err != nil {
		t.Fatal(err)
	}

	if err := AcquireLease(ctx, cli, "cp2", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("another's release freed the lease: %v", err)
	}

	if err := ReleaseLease(ctx, cli, "cp1"); err != nil {
		t.Fatal(err)
	}

	if err := AcquireLease(ctx, cli, "cp2", time.Minute); err != nil {
		t.Fatalf("after the release: %v", err)
	}
}
