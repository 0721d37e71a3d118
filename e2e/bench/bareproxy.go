package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
)

// BareProxyBinary is the transparent proxy that is apid's floor
// (e2e/bench/bareproxy), built by `make bench` into the binaries'
// directory.
const BareProxyBinary = "bareproxy"

// bareProxy is the bare transparent proxy run in front of the control
// plane's machined, and a client of it.
type bareProxy struct {
	proc *process
	conn *grpc.ClientConn
	// call is Version through the proxy, with talos-role os:admin: the
	// proxy copies the caller's metadata as it is, where apid sets the
	// roles it decided.
	call func(context.Context) error
}

// startBareProxy runs the bare proxy on the control plane's address, in
// front of its machined's socket, with a server certificate of a CA of its
// own (of the cluster CA's key type) and the cluster's CAs for client
// certificates; its client is the cluster's admin, over one connection.
func (r *run) startBareProxy(ctx context.Context, e *clusterEnv) (*bareProxy, error) {
	admin, clusterCA, err := adminCredentials(e)
	if err != nil {
		return nil, err
	}

	dir := filepath.Join(r.dir, "bareproxy")
	addr := net.JoinHostPort(e.cp.Address, strconv.Itoa(BareProxyPort))

	args, roots, err := writeBareProxyFiles(dir, e.cp.Address, clusterCA)
	if err != nil {
		return nil, err
	}

	bp := &bareProxy{}

	bp.proc, err = r.start(BareProxyBinary, filepath.Join(dir, "bareproxy.log"), filepath.Join(r.cfg.BinDir, BareProxyBinary),
		append(args, "--listen", addr, "--backend", machinedSocket(e))...)
	if err != nil {
		return nil, err
	}

	if err = bp.proc.waitListening(ctx, addr); err != nil {
		return nil, errors.Join(err, bp.proc.stop())
	}

	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{admin}, RootCAs: roots, ServerName: e.cp.Address, MinVersion: tls.VersionTLS13,
	})

	if bp.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(creds)); err != nil {
		return nil, errors.Join(err, bp.proc.stop())
	}

	bp.call = versionCall(machine.NewMachineServiceClient(bp.conn), metadata.Pairs(wire.MetadataRole, string(role.Admin)))

	if err = untilOK(ctx, bp.call, bp.proc); err != nil {
		return nil, errors.Join(err, bp.close())
	}

	return bp, nil
}

// close closes the client and stops the proxy.
func (bp *bareProxy) close() error {
	bp.conn.Close() //nolint:errcheck // a client connection; the proxy's stop is what counts

	return bp.proc.stop()
}

// writeBareProxyFiles writes into dir the proxy's server pair for ip, from
// a new CA of the key type of clusterCA's first certificate, and clusterCA
// (PEM) as the CAs of client certificates; it returns the proxy's flags naming them and the pool a
// client checks the proxy by.
func writeBareProxyFiles(dir, ip string, clusterCA []byte) ([]string, *x509.CertPool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}

	block, _ := pem.Decode(clusterCA)
	if block == nil {
		return nil, nil, errors.New("bench: the client config's CA is not PEM")
	}

	first, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}

	kt, err := ca.KeyTypeOf(first.PublicKey)
	if err != nil {
		return nil, nil, err
	}

	bundle, err := certs.GenerateBundle(certs.BundleOptions{OSKeyType: kt})
	if err != nil {
		return nil, nil, err
	}

	authority, err := bundle.OSCA(time.Now())
	if err != nil {
		return nil, nil, err
	}

	crt, key, err := serverPair(authority, ip)
	if err != nil {
		return nil, nil, err
	}

	files := []struct {
		flag, name string
		data       []byte
	}{
		{"--cert", "tls.pem", crt}, {"--key", "tls-key.pem", key},
		{"--client-ca", "client-ca.pem", clusterCA},
	}

	var args []string

	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			return nil, nil, err
		}

		args = append(args, f.flag, path)
	}

	roots := x509.NewCertPool()
	roots.AddCert(authority.Cert)

	return args, roots, nil
}
