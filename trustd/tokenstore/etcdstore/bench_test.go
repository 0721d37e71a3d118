package etcdstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// BenchmarkLimitedToken measures whole Certificate calls of an in-process
// trustd for a limited-use token, each counting one use, with the bbolt
// store and with the etcd store (a one-member etcd in the same process, so
// no network round trip between members: a floor for a real cluster), and
// with the etcd store reading the record before each change (etcd-read-first,
// as it did before it kept the last record it saw).
func BenchmarkLimitedToken(b *testing.B) {
	stores := map[string]func(b *testing.B) tokenstore.Store{
		"bbolt": func(b *testing.B) tokenstore.Store {
			s, err := boltstore.Open(boltstore.Config{Path: filepath.Join(b.TempDir(), "tokens.db")})
			if err != nil {
				b.Fatal(err)
			}

			b.Cleanup(func() { s.Close() })

			return s
		},
		"etcd": func(b *testing.B) tokenstore.Store {
			e, _ := etcdtest.Start(b)

			s, err := etcdstore.New(etcdstore.Config{Client: etcdtest.Client(b, e)})
			if err != nil {
				b.Fatal(err)
			}

			return s
		},
		"etcd-read-first": func(b *testing.B) tokenstore.Store {
			e, _ := etcdtest.Start(b)

			s, err := etcdstore.NewReadFirst(etcdstore.Config{Client: etcdtest.Client(b, e)})
			if err != nil {
				b.Fatal(err)
			}

			return s
		},
	}

	for _, name := range []string{"bbolt", "etcd", "etcd-read-first"} {
		b.Run(name, func(b *testing.B) {
			env := trustdtest.Start(b, trustdtest.Options{Store: stores[name](b), GateOpen: true})
			tok := env.CreateToken(b, time.Hour, 1<<30)
			client := env.Client(b, "")
			csr := trustdtest.SourceCSR(b, ca.Ed25519, trustdtest.CallerIP)
			ctx := context.Background()
			start := time.Now()

			for b.Loop() {
				if _, err := trustdtest.Call(ctx, client, tok, csr); err != nil {
					b.Fatal(err)
				}
			}

			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "certs/s")
		})
	}
}

// BenchmarkUse measures one counted use of a kept token, one caller at a
// time, against what it is built on: "txn" is the bare compare-and-put of a
// record of the same size, "etcd" the store's UseIf on the same one-member
// etcd, "bbolt" the bbolt store's Use. etcd minus txn is what the store
// adds to its one transaction (batching, encoding, the kept record).
func BenchmarkUse(b *testing.B) {
	ctx := context.Background()
	rec := storetest.NewRecord(b, "b3nch6", time.Hour, 1<<30)
	check := func(tokenstore.Record) error { return nil }

	b.Run("txn", func(b *testing.B) {
		e, _ := etcdtest.Start(b)
		cli := etcdtest.Client(b, e)
		value := strings.Repeat("x", len(marshal(b, rec)))
		rev := int64(0)

		for b.Loop() {
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("k"), "=", rev)).
				Then(clientv3.OpPut("k", value)).Else(clientv3.OpGet("k")).Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err, resp.Succeeded)
			}

			rev = resp.Header.Revision
		}
	})

	b.Run("etcd", func(b *testing.B) {
		e, _ := etcdtest.Start(b)

		s, err := etcdstore.New(etcdstore.Config{Client: etcdtest.Client(b, e)})
		if err != nil {
			b.Fatal(err)
		}

		if err := s.Create(ctx, rec); err != nil {
			b.Fatal(err)
		}

		for b.Loop() {
			if _, err := s.UseIf(ctx, rec.ID, time.Now(), check); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("bbolt", func(b *testing.B) {
		s, err := boltstore.Open(boltstore.Config{Path: filepath.Join(b.TempDir(), "tokens.db")})
		if err != nil {
			b.Fatal(err)
		}

		b.Cleanup(func() { s.Close() })

		if err := s.Create(ctx, rec); err != nil {
			b.Fatal(err)
		}

		for b.Loop() {
			if _, err := s.Use(ctx, rec.ID, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func marshal(tb testing.TB, r tokenstore.Record) []byte {
	tb.Helper()

	data, err := tokenstore.MarshalRecord(r)
	if err != nil {
		tb.Fatal(err)
	}

	return data
}
