package apid_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/wire"
)

// benchIP is the benchmarks' loopback address.
const benchIP = "127.0.2.11"

// BenchmarkVersion compares Version straight to the backend (what apid
// adds nothing to: a Unix socket, roles in metadata) with Version through
// apid (TLS, the interceptor chain, the raw-frame proxy, the Unix socket
// hop). Serial runs give latency, parallel runs throughput. apid writes
// its request log line at every call, as in production (at info level),
// to a writer that drops it.
func BenchmarkVersion(b *testing.B) {
	p := apidtest.NewPKI(b)
	node := apidtest.StartNode(b, p, apidtest.NodeConfig{IP: benchIP, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})

	direct, err := grpc.NewClient("unix:"+node.Backend.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close() //nolint:errcheck

	directCtx := metadata.AppendToOutgoingContext(context.Background(), wire.MetadataRole, string(role.Admin))
	viaAPID := apidtest.TalosClient(b, node.Addr, p.ClientTLS(b, p.Client(b, role.Admin))).MachineClient

	for _, c := range []struct {
		name string
		ctx  context.Context
		mc   machine.MachineServiceClient
	}{
		{"direct", directCtx, machine.NewMachineServiceClient(direct)},
		{"apid", context.Background(), viaAPID},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()

			cpu := processCPU(b)

			for b.Loop() {
				if _, err := c.mc.Version(c.ctx, &emptypb.Empty{}); err != nil {
					b.Fatal(err)
				}
			}

			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})

		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()

			start := time.Now()

			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.mc.Version(c.ctx, &emptypb.Empty{}); err != nil {
						b.Error(err)

						return
					}
				}
			})

			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// processCPU is the CPU time the process has used: client, apid and
// backend together, which a loaded machine's wall clock does not show.
func processCPU(b *testing.B) time.Duration {
	b.Helper()

	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}

	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNewTLSConnection measures full handshakes: TLS 1.3 with client
// certificate verification, up to apid's first HTTP/2 frame, which it
// sends only once it has accepted the client.
func BenchmarkNewTLSConnection(b *testing.B) {
	p := apidtest.NewPKI(b)
	node := apidtest.StartNode(b, p, apidtest.NodeConfig{IP: benchIP})
	cfg := p.ClientTLS(b, p.Client(b, role.Admin))
	cfg.NextProtos = []string{"h2"}
	cfg.ServerName = benchIP

	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	frameHeader := make([]byte, 9)
	start := time.Now()

	for b.Loop() {
		conn, err := tls.Dial("tcp", node.Addr, cfg)
		if err != nil {
			b.Fatal(err)
		}

		if _, err := conn.Write(preface); err != nil {
			b.Fatal(err)
		}

		if _, err := io.ReadFull(conn, frameHeader); err != nil {
			b.Fatal(err)
		}

		conn.Close()
	}

	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
}

// BenchmarkFanOut measures Version with `nodes` over 1, 5 and 20 nodes,
// in-process: the entry node serves itself locally and forwards to the
// others.
func BenchmarkFanOut(b *testing.B) {
	p := apidtest.NewPKI(b)

	const most = 20

	addrs := make([]string, most)

	var entry *apidtest.Node

	for i := range addrs {
		n := apidtest.StartNode(b, p, apidtest.NodeConfig{IP: benchIP})
		addrs[i] = n.IP

		if i == 0 {
			entry = n
		}
	}

	mc := apidtest.TalosClient(b, entry.Addr, p.ClientTLS(b, p.Client(b, role.Reader))).MachineClient

	for _, count := range []int{1, 5, most} {
		ctx := client.WithNodes(context.Background(), addrs[:count]...)

		b.Run(strconv.Itoa(count)+"-nodes", func(b *testing.B) {
			b.ReportAllocs()

			for b.Loop() {
				resp, err := mc.Version(ctx, &emptypb.Empty{})
				if err != nil || len(resp.Messages) != count {
					b.Fatalf("%v, %d replies", err, len(resp.GetMessages()))
				}
			}
		})
	}
}
