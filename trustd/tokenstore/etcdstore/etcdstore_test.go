package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

func TestConformance(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	prefixes := map[tokenstore.Store]string{}
	n := 0

	open := func(t *testing.T, prefix string, maxRecords int) tokenstore.Store {
		s, err := etcdstore.New(etcdstore.Config{Client: cli, Prefix: prefix, MaxRecords: maxRecords})
		if err != nil {
			t.Fatal(err)
		}

		prefixes[s] = prefix

		return s
	}

	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T, maxRecords int) tokenstore.Store {
			n++

			return open(t, fmt.Sprintf("/test/%d/", n), maxRecords)
		},
		Reopen: func(t *testing.T, old tokenstore.Store) tokenstore.Store {
			return open(t, prefixes[old], 0)
		},
	})
}

// TestUnavailable checks that a store whose etcd is gone refuses with
// ErrUnavailable within its timeout instead of hanging or answering.
func TestUnavailable(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)

	s, err := etcdstore.New(etcdstore.Config{Client: cli, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	if err = s.Create(ctx, storetest.NewRecord(t, "abc123", 0, 1)); err != nil {
		t.Fatal(err)
	}

	stop()

	for name, op := range map[string]func() error{
		"get":    func() error { _, err := s.Get(ctx, "abc123"); return err },
		"use":    func() error { _, err := s.Use(ctx, "abc123", testutil.Epoch); return err },
		"list":   func() error { _, err := s.List(ctx); return err },
		"create": func() error { return s.Create(ctx, storetest.NewRecord(t, "def456", 0, 1)) },
	} {
		if err := op(); !errors.Is(err, tokenstore.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
}

// TestPruneLeavesCorruptRecord: a record that does not parse is left for
// the operator to see, while an ended one goes.
func TestPruneLeavesCorruptRecord(t *testing.T) {
	e, _ := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	ctx := context.Background()

	s, err := etcdstore.New(etcdstore.Config{Client: cli})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Create(ctx, storetest.NewRecord(t, "abc123", 0, 1)); err != nil {
		t.Fatal(err)
	}

	if _, err := cli.Put(ctx, etcdstore.DefaultPrefix+"bad", "not a record"); err != nil {
		t.Fatal(err)
	}

	if n, err := s.Prune(ctx, testutil.Epoch.Add(48*time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the ended record alone deleted", n, err)
	}

	resp, err := cli.Get(ctx, etcdstore.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != etcdstore.DefaultPrefix+"bad" {
		t.Fatalf("left %v (%v), want the corrupt record alone", resp.Kvs, err)
	}
}
