package conformance

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Outcomes of a handshake, as cases expect them.
const (
	tlsRefused  = "TLS refused"
	tlsAccepted = "TLS accepted"
)

// handshakeTimeout bounds a TLS probe's wait for the server's verdict.
const handshakeTimeout = 15 * time.Second

// handshake connects to addr with cfg and reports whether the server took
// the client: in TLS 1.3 the client's side of the handshake ends before
// the server has checked the client's certificate, so the verdict is what
// comes next, the server's first HTTP/2 frame or its alert.
func handshake(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	return handshakeFrom(ctx, addr, "", cfg)
}

// handshakeFrom is handshake from the loopback address source ("" lets
// the system choose).
func handshakeFrom(ctx context.Context, addr, source string, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()

	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{}}
	if source != "" {
		d.NetDialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}

	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return tlsRefused, err
	}
	defer conn.Close() //nolint:errcheck // a probe connection

	deadline, _ := ctx.Deadline()
	if err = conn.SetReadDeadline(deadline); err != nil {
		return "", err
	}

	if _, err = conn.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "no answer", err
		}

		return tlsRefused, err
	}

	return tlsAccepted, nil
}

// tlsCase is a case whose client must be refused in the handshake; a
// gRPC call with the same client must fail as Unavailable, never reaching
// machined.
func tlsCase(name string, cfg func(e *Env) *tls.Config) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: tlsRefused,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			return refusedHandshake(ctx, e, e.Target, cfg(e), r)
		},
	}
}

func refusedHandshake(ctx context.Context, e *Env, node string, cfg *tls.Config, r *Report) string {
	got, err := handshake(ctx, apidAddr(node), cfg)
	if got != tlsRefused {
		r.Problemf("handshake: %s (%v)", got, err)
	}

	callCtx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()

	if code := callVersion(callCtx, node, cfg); code != codes.Unavailable {
		r.Problemf("a gRPC call with the same client ended %s, want Unavailable", code)
	}

	return got
}

// callVersion makes one Version call with cfg and returns its code.
func callVersion(ctx context.Context, node string, cfg *tls.Config) codes.Code {
	conn, err := dialTLS(apidAddr(node), cfg)
	if err != nil {
		return codes.Unknown
	}
	defer conn.Close() //nolint:errcheck // one call

	_, err = machine.NewMachineServiceClient(conn).Version(ctx, &emptypb.Empty{})

	return status.Code(err)
}

// identityTLS is e's client config for the target presenting the identity
// pick chooses.
func identityTLS(pick func(*identities) Identity) func(e *Env) *tls.Config {
	return func(e *Env) *tls.Config { return e.clientTLS(e.Target, pick(e.ids)) }
}

// versionTLS is the admin's client config limited to TLS versions min..max.
func versionTLS(minV, maxV uint16) func(e *Env) *tls.Config {
	return func(e *Env) *tls.Config {
		cfg := e.clientTLS(e.Target, e.ids.admin)
		cfg.MinVersion, cfg.MaxVersion = minV, maxV

		return cfg
	}
}

// apidTLSCases are the clients apid must refuse in the handshake, and
// those whose certificate apid never sees (withheldCase). A client without
// a certificate may probe the health service and is refused every other
// call (healthCases).
func apidTLSCases() []*Case {
	return []*Case{
		withheldCase("self-signed os:admin certificate", identityTLS(func(i *identities) Identity { return i.selfSigned })),
		withheldCase("reader certificate from another CA", identityTLS(func(i *identities) Identity { return i.otherCA })),
		withheldCase("os:admin forged by another CA", identityTLS(func(i *identities) Identity { return i.forgedAdmin })),
		tlsCase("expired os:admin certificate", identityTLS(func(i *identities) Identity { return i.expired })),
		tlsCase("os:admin certificate not yet valid", identityTLS(func(i *identities) Identity { return i.notYetValid })),
		tlsCase("os:admin certificate with ServerAuth only", identityTLS(func(i *identities) Identity { return i.serverOnly })),
		tlsCase("os:admin certificate without extended key usage", identityTLS(func(i *identities) Identity { return i.noUsage })),
		tlsCase("the OS CA certificate as client", identityTLS(func(i *identities) Identity { return i.caItself })),
		tlsCase("CA:TRUE os:admin certificate with ClientAuth", identityTLS(func(i *identities) Identity { return i.caLeaf })),
		tlsCase("os:admin through an intermediate CA", identityTLS(func(i *identities) Identity { return i.intermediate })),
		tlsCase("TLS 1.2 with the admin certificate", versionTLS(tls.VersionTLS12, tls.VersionTLS12)),
		tlsCase("TLS 1.0 with the admin certificate", versionTLS(tls.VersionTLS10, tls.VersionTLS10)),
	}
}
