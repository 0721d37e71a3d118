package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/token"
)

// fakeTrustd signs server certificates with the test PKI for one token,
// as trustd's Certificate method does, and records the endpoints called.
type fakeTrustd struct {
	pki    *apidtest.PKI
	token  string
	called []string
}

func (f *fakeTrustd) Certificate(_ context.Context, endpoint string, tok token.Token, csrPEM []byte) ([]byte, []byte, error) {
	f.called = append(f.called, endpoint)

	if tok.Reveal() != f.token {
		return nil, nil, status.Error(codes.Unauthenticated, "token unknown")
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}

	issued, err := f.pki.Issuer().Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer})
	if err != nil {
		return nil, nil, err
	}

	return f.pki.CA.CertPEM, issued.PEM, nil
}

func TestCertificateRequest(t *testing.T) {
	pki := apidtest.NewPKI(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")

	if err := os.WriteFile(caFile, pki.CA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	good := "w4k2zq.0123456789abcdef"
	trustd := &fakeTrustd{pki: pki, token: good}
	run := func(tok string, args ...string) (string, error) {
		var out bytes.Buffer

		e := &env{clock: clock.Real(), stdout: &out, stderr: &bytes.Buffer{}, joinTransport: trustd}
		cmd := newRootCommand(e)
		cmd.SetArgs(append([]string{"certificate", "request", "--token", tok, "--ca-cert", caFile}, args...))

		err := cmd.ExecuteContext(context.Background())

		return out.String(), err
	}

	prefix := filepath.Join(dir, "edge-1")

	out, err := run(good, "--san", "10.0.0.9", "--out", prefix, "127.5.0.2", "edge-1.example")
	if err != nil {
		t.Fatalf("certificate request: %v", err)
	}

	if !strings.Contains(out, "wrote "+prefix+".key and "+prefix+".crt") || strings.Join(trustd.called, ",") != "127.5.0.2:50001" {
		t.Fatalf("output %q, endpoints called %q", out, trustd.called)
	}

	st, err := os.Stat(prefix + ".key")
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st)
	}

	crtPEM, _ := os.ReadFile(prefix + ".crt")

	cert, err := ca.ParseCertificate(crtPEM)
	if err != nil || cert.Subject.CommonName != "edge-1.example" || len(cert.IPAddresses) != 1 {
		t.Fatalf("certificate: %v, %+v", err, cert)
	}

	t.Run("files kept without --force", func(t *testing.T) {
		if _, err := run(good, "--out", prefix, "127.5.0.2", "edge-1.example"); err == nil || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("refused token writes nothing", func(t *testing.T) {
		other := filepath.Join(dir, "edge-2")
		trustd.called = nil

		_, err := run("aaaaaa.0123456789abcdef", "--out", other, "127.5.0.2,127.5.0.3", "edge-2.example")
		if err == nil || !strings.Contains(err.Error(), "token") || len(trustd.called) != 2 {
			t.Fatalf("err = %v, endpoints called %q", err, trustd.called)
		}

		if fileExists(other+".key") || fileExists(other+".crt") {
			t.Fatal("files written after a refusal")
		}
	})

	t.Run("malformed token", func(t *testing.T) {
		if _, err := run("nope", "127.5.0.2", "x"); err == nil || !strings.Contains(err.Error(), "--token") {
			t.Fatalf("err = %v", err)
		}
	})
}
