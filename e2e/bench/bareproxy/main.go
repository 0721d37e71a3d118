// Command bareproxy is the benchmark harness's floor for apid: a transparent
// gRPC proxy built on github.com/siderolabs/grpc-proxy, the proxy library
// Talos's own apid is built on. It accepts mutual TLS (a client certificate
// from --client-ca is required), and forwards every call's raw frames and
// metadata, unread, to one backend over a Unix socket, the way apid reaches
// its machined. It neither authorizes, routes nor logs calls: what apid
// costs over it is what apid's checks, routing and records add.
//
//	bareproxy --listen ADDR --cert FILE --key FILE --client-ca FILE --backend SOCKET
//
// It is a measuring instrument, built by `make bench` and never shipped.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/siderolabs/grpc-proxy/proxy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

type options struct {
	listen, cert, key, clientCA, backend string
}

func main() {
	var o options

	flag.StringVar(&o.listen, "listen", "", "`ADDR` to serve mutual TLS on")
	flag.StringVar(&o.cert, "cert", "", "server certificate `FILE` (PEM)")
	flag.StringVar(&o.key, "key", "", "server key `FILE` (PEM)")
	flag.StringVar(&o.clientCA, "client-ca", "", "`FILE` of the CA certificates client certificates must chain to (PEM)")
	flag.StringVar(&o.backend, "backend", "", "Unix `SOCKET` of the gRPC server every call goes to")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.listen == "" || o.cert == "" || o.key == "" || o.clientCA == "" || o.backend == "" {
		return errors.New("--listen, --cert, --key, --client-ca and --backend are all required")
	}

	tlsCfg, err := serverTLS(o)
	if err != nil {
		return err
	}

	backend, err := grpc.NewClient("unix://"+o.backend,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(proxy.Codec())))
	if err != nil {
		return fmt.Errorf("backend %s: %w", o.backend, err)
	}
	defer backend.Close() //nolint:errcheck // exiting

	one := []proxy.Backend{&proxy.SingleBackend{GetConn: func(ctx context.Context) (context.Context, *grpc.ClientConn, error) {
		md, _ := metadata.FromIncomingContext(ctx)

		return metadata.NewOutgoingContext(ctx, md), backend, nil
	}}}

	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.ForceServerCodecV2(proxy.Codec()),
		grpc.UnknownServiceHandler(proxy.TransparentHandler(func(context.Context, string) (proxy.Mode, []proxy.Backend, error) {
			return proxy.One2One, one, nil
		})),
	)

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}

	go func() {
		<-ctx.Done()
		srv.Stop()
	}()

	return srv.Serve(lis)
}

// serverTLS requires a client certificate that chains to --client-ca.
func serverTLS(o options) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return nil, err
	}

	pem, err := os.ReadFile(o.clientCA)
	if err != nil {
		return nil, err
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no CA certificate", o.clientCA)
	}

	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
