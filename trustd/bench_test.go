package trustd_test

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// BenchmarkCertificate measures whole Certificate calls against an
// in-process trustd on loopback, the static token and an open time gate:
// over one kept connection, and with a new TLS connection per request (what
// a joining node does). Besides ns/op it reports certificates per second and
// the p50 and p99 latencies of single calls.
func BenchmarkCertificate(b *testing.B) {
	for _, kt := range ca.KeyTypes() {
		env := trustdtest.Start(b, trustdtest.Options{KeyType: kt, GateOpen: true})
		csr := trustdtest.SourceCSR(b, kt, trustdtest.CallerIP)
		creds := credentials.NewTLS(&tls.Config{RootCAs: env.CAs.Pool(), ServerName: trustdtest.ListenIP, MinVersion: tls.VersionTLS13})

		b.Run(string(kt)+"/one-connection", func(b *testing.B) {
			client := env.Client(b, "")

			benchCalls(b, func(ctx context.Context) error {
				_, err := trustdtest.Call(ctx, client, trustdtest.StaticToken, csr)

				return err
			})
		})

		b.Run(string(kt)+"/new-connection", func(b *testing.B) {
			benchCalls(b, func(ctx context.Context) error {
				conn, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(creds))
				if err != nil {
					return err
				}
				defer conn.Close()

				_, err = trustdtest.Call(ctx, securityapi.NewSecurityServiceClient(conn), trustdtest.StaticToken, csr)

				return err
			})
		})
	}
}

// benchCalls runs call in the benchmark loop, timing each call.
func benchCalls(b *testing.B, call func(context.Context) error) {
	b.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A first call outside the measurement warms connection and caches.
	if err := call(ctx); err != nil {
		b.Fatal(err)
	}

	var latencies []time.Duration

	start := time.Now()

	for b.Loop() {
		t0 := time.Now()

		if err := call(ctx); err != nil {
			b.Fatal(err)
		}

		latencies = append(latencies, time.Since(t0))
	}

	elapsed := time.Since(start)

	slices.Sort(latencies)
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "certs/s")
	b.ReportMetric(percentile(latencies, 50).Seconds()*1e6, "p50-us")
	b.ReportMetric(percentile(latencies, 99).Seconds()*1e6, "p99-us")
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}

	i := (len(sorted)*p+99)/100 - 1

	return sorted[max(i, 0)]
}
