package etcdstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
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
