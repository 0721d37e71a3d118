package main

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/metrics/metricstest"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/storetest"
)

// The token store's size is read at each scrape, against its limit.
func TestTokenMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	store := tokenstore.NewMemory(0)
	d := &daemon{metrics: reg, store: store}

	if err := d.registerTokenMetrics(); err != nil {
		t.Fatal(err)
	}

	if got := metricstest.Gather(t, reg).Must(t, metrics.TrustdTokens); got != 0 {
		t.Fatalf("empty store: %v tokens", got)
	}

	for _, id := range []string{"aaaaaa", "bbbbbb"} {
		if err := store.Create(t.Context(), storetest.NewRecord(t, id, time.Hour, 1)); err != nil {
			t.Fatal(err)
		}
	}

	fams := metricstest.Gather(t, reg)
	if got, limit := fams.Must(t, metrics.TrustdTokens), fams.Must(t, metrics.TrustdTokensLimit); got != 2 || limit != tokenstore.DefaultMaxRecords {
		t.Fatalf("tokens %v of %v, want 2 of %d", got, limit, tokenstore.DefaultMaxRecords)
	}

	// Without metrics nothing is registered.
	if err := (&daemon{store: store}).registerTokenMetrics(); err != nil {
		t.Fatal(err)
	}
}
