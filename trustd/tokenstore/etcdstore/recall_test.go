package etcdstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

const storedSecret = "0123456789abcdef" // storetest.NewRecord's secret

// controlPlane is one control plane's trustd authenticator over its own
// etcd store and client, with the key-value calls its client makes counted.
type controlPlane struct {
	store *etcdstore.Store
	auth  *tokenauth.Authenticator
	calls atomic.Int64
}

func newControlPlane(t *testing.T, e *embed.Etcd) *controlPlane {
	t.Helper()

	cp := &controlPlane{}
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasPrefix(method, "/etcdserverpb.KV/") {
			cp.calls.Add(1)
		}

		return invoker(ctx, method, req, reply, cc, opts...)
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { cli.Close() })

	if cp.store, err = etcdstore.New(etcdstore.Config{Client: cli}); err != nil {
		t.Fatal(err)
	}

	cp.authOver(t, cp.store)

	return cp
}

// authOver makes cp's authenticator one over store.
func (cp *controlPlane) authOver(t *testing.T, store tokenstore.Store) {
	t.Helper()

	var err error

	cp.auth, err = tokenauth.New(tokenauth.Config{Store: store, Clock: clock.NewFake(testutil.Epoch.Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
}

// handedOver puts a handover whose tokens are on etcd, as a control plane's
// trustd runs it, in front of cp's etcd store.
func (cp *controlPlane) handedOver(t *testing.T) {
	t.Helper()

	marker := filepath.Join(t.TempDir(), "tokens-on-etcd")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	h, err := etcdstore.NewHandover(etcdstore.HandoverConfig{
		Local: tokenstore.NewMemory(0), Shared: cp.store, Formed: func() bool { return true }, Marker: marker,
	})
	if err != nil {
		t.Fatal(err)
	}

	cp.authOver(t, h)
}

// issue runs what trustd runs for one certificate: authenticate, then
// count the use.
func (cp *controlPlane) issue(t *testing.T, tok string) error {
	t.Helper()

	parsed, err := token.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()

	g, err := cp.auth.Authenticate(ctx, parsed)
	if err != nil {
		return err
	}

	return cp.auth.Consume(ctx, g)
}

// TestOneRoundPerIssuance checks that a certificate for a limited-use
// token costs one call to etcd, the transaction that counts the use, once
// the control plane has seen the token: it authenticates on the record it
// kept, and the transaction's revision compare is the freshness check.
func TestOneRoundPerIssuance(t *testing.T) {
	e, _ := etcdtest.Start(t)

	for name, handover := range map[string]bool{"etcd store": false, "handover on etcd": true} {
		t.Run(name, func(t *testing.T) {
			cp := newControlPlane(t, e)
			if handover {
				cp.handedOver(t)
			}

			id := map[bool]string{false: "limitd", true: "handed"}[handover]
			if err := cp.store.Create(context.Background(), storetest.NewRecord(t, id, 0, 100)); err != nil {
				t.Fatal(err)
			}

			for i := range 5 {
				cp.calls.Store(0)

				if err := cp.issue(t, id+"."+storedSecret); err != nil {
					t.Fatalf("issuance %d: %v", i+1, err)
				}

				if n := cp.calls.Load(); i > 0 && n != 1 {
					t.Fatalf("issuance %d: %d calls to etcd, want 1 (the transaction)", i+1, n)
				}
			}

			r, err := cp.store.Get(context.Background(), id)
			if err != nil || r.Uses != 5 {
				t.Fatalf("after 5 issuances: %d uses, %v", r.Uses, err)
			}
		})
	}
}

// TestStaleKeptRecord runs two control planes on one etcd: what one keeps
// goes stale when the other changes the token, and an issuance on the
// stale record must be judged on the record as it is.
func TestStaleKeptRecord(t *testing.T) {
	e, _ := etcdtest.Start(t)
	a, b := newControlPlane(t, e), newControlPlane(t, e)
	ctx := context.Background()

	create := func(t *testing.T, r tokenstore.Record) {
		t.Helper()

		if err := b.store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("revoked on the other", func(t *testing.T) {
		create(t, storetest.NewRecord(t, "revokd", 0, 100))

		if err := a.issue(t, "revokd."+storedSecret); err != nil { // a keeps it usable
			t.Fatal(err)
		}

		if _, err := b.store.Revoke(ctx, "revokd", testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if err := a.issue(t, "revokd."+storedSecret); !errors.Is(err, trustd.ErrInvalidToken) || !errors.Is(err, tokenstore.ErrRevoked) {
			t.Fatalf("issuance after a revocation on the other control plane: %v, want a refusal for ErrRevoked", err)
		}

		if err := a.issue(t, "revokd."+storedSecret); !errors.Is(err, tokenstore.ErrRevoked) {
			t.Fatalf("the next issuance: %v, want a refusal for ErrRevoked", err)
		}

		if r, err := b.store.Get(ctx, "revokd"); err != nil || r.Uses != 1 {
			t.Fatalf("uses of the revoked token: %d, %v; want the 1 before the revocation", r.Uses, err)
		}
	})

	t.Run("used up on the other", func(t *testing.T) {
		create(t, storetest.NewRecord(t, "single", 0, 1))

		if _, err := a.store.Get(ctx, "single"); err != nil { // a keeps it unused
			t.Fatal(err)
		}

		if err := b.issue(t, "single."+storedSecret); err != nil {
			t.Fatal(err)
		}

		if err := a.issue(t, "single."+storedSecret); !errors.Is(err, tokenstore.ErrUsedUp) {
			t.Fatalf("second issuance of a single-use token: %v, want a refusal for ErrUsedUp", err)
		}
	})

	t.Run("wrong secret", func(t *testing.T) {
		create(t, storetest.NewRecord(t, "secret", 0, 100))

		if err := a.issue(t, "secret."+storedSecret); err != nil { // a keeps it
			t.Fatal(err)
		}

		if err := a.issue(t, "secret.fedcba9876543210"); !errors.Is(err, trustd.ErrInvalidToken) {
			t.Fatalf("wrong secret of a kept token: %v, want ErrInvalidToken", err)
		}
	})

	t.Run("replaced under the same id", func(t *testing.T) {
		create(t, storetest.NewRecord(t, "replcd", 0, 100))

		if err := a.issue(t, "replcd."+storedSecret); err != nil { // a keeps it
			t.Fatal(err)
		}

		// The other control plane's operator deletes it and makes a token
		// with the same id and another secret.
		if _, err := b.store.Revoke(ctx, "replcd", testutil.Epoch); err != nil {
			t.Fatal(err)
		}

		if _, err := b.store.Prune(ctx, testutil.Epoch.Add(time.Second)); err != nil {
			t.Fatal(err)
		}

		other := storetest.NewRecord(t, "replcd", 0, 100)
		if err := other.SetSecret(strings.NewReader(strings.Repeat("x", 64)), "fedcba9876543210"); err != nil {
			t.Fatal(err)
		}

		create(t, other)

		if err := a.issue(t, "replcd."+storedSecret); !errors.Is(err, trustd.ErrInvalidToken) {
			t.Fatalf("old secret of a replaced token: %v, want ErrInvalidToken", err)
		}

		if r, err := b.store.Get(ctx, "replcd"); err != nil || r.Uses != 0 {
			t.Fatalf("uses of the new token: %d, %v; want 0 (no use charged by the old secret)", r.Uses, err)
		}

		if err := a.issue(t, "replcd.fedcba9876543210"); err != nil {
			t.Fatalf("new secret: %v", err)
		}
	})
}

// TestUseIfRefusal checks that a refusal by the check counts nothing, and
// that the check sees the record as it is, not as it was kept.
func TestUseIfRefusal(t *testing.T) {
	e, _ := etcdtest.Start(t)
	a, b := newControlPlane(t, e), newControlPlane(t, e)
	ctx := context.Background()

	if err := a.store.Create(ctx, storetest.NewRecord(t, "checkd", 0, 10)); err != nil {
		t.Fatal(err)
	}

	if _, err := a.store.Get(ctx, "checkd"); err != nil { // a keeps it unused
		t.Fatal(err)
	}

	if _, err := b.store.Use(ctx, "checkd", testutil.Epoch); err != nil {
		t.Fatal(err)
	}

	var seen []uint32

	errNo := errors.New("no")

	_, err := a.store.UseIf(ctx, "checkd", testutil.Epoch, func(r tokenstore.Record) error {
		seen = append(seen, r.Uses)

		return errNo
	})
	if !errors.Is(err, errNo) {
		t.Fatalf("UseIf: %v, want the check's refusal", err)
	}

	if len(seen) == 0 || seen[len(seen)-1] != 1 {
		t.Fatalf("the check saw uses %v, want the last to be the current 1", seen)
	}

	if r, _ := b.store.Get(ctx, "checkd"); r.Uses != 1 {
		t.Fatalf("uses after a refused UseIf: %d, want 1", r.Uses)
	}
}
