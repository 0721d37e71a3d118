package namestore_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	"github.com/aegis-os/aegis/trustd/namestore"
)

// BenchmarkJoinNames is what a join naming one name costs the record on a
// one-member etcd: the control planes' names, the check and the binding.
func BenchmarkJoinNames(b *testing.B) {
	e, _ := etcdtest.Start(b)

	s, err := namestore.New(namestore.Config{Client: etcdtest.Client(b, e)})
	if err != nil {
		b.Fatal(err)
	}

	ctx := context.Background()
	src := netip.MustParseAddr("10.0.0.5")

	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("worker-%d", i)

		if _, err := s.ControlPlaneNames(ctx); err != nil {
			b.Fatal(err)
		}

		if err := s.Check(ctx, name, src); err != nil {
			b.Fatal(err)
		}

		if err := s.Bind(ctx, binding(name, "10.0.0.5", time.Now().Add(time.Hour))); err != nil {
			b.Fatal(err)
		}
	}
}
