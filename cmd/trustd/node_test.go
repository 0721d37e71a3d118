package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/resources"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestNodeMode runs trustd on resources served by a stand-in for machined's
// trustd socket: it serves only once the resources arrive, refuses while the
// node's time is not synced, and signs once machined reports sync.
func TestNodeMode(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	authority := catest.NewCA(t, ca.Ed25519, now)
	crt, key := trustdtest.ServerCertificate(t, authority, "127.0.1.4")
	tok := "abcdef.0123456789abcdef"

	store := resources.NewStore()
	store.Update(func(r *node.Resources) {
		r.OsCa = &node.KeyPair{Crt: authority.CertPEM, Key: authority.KeyPEM}
		r.Server = &node.KeyPair{Crt: crt, Key: key}
		r.AcceptedCas = authority.CertPEM
		r.TrustdToken = tok
		r.Time = &node.TimeStatus{Synced: false}
		r.ControlPlaneHosts = []string{"cp-9.example:50001"}
		r.WorkerSans = []string{"worker-*.example", "cp-*.example"}
	})

	sock := serveResources(t, filepath.Join(dir, "trustd.sock"), store)

	ctx, cancel := context.WithCancel(context.Background())
	logs := &logtest.Sink{}
	done := make(chan error, 1)

	go func() {
		done <- run(ctx, []string{"--node-socket", sock, "--state", filepath.Join(dir, "state"), "--listen", "127.0.1.4:0"}, io.Discard, logs)
	}()

	addr := waitServing(t, logs)
	client := dialTrustd(t, addr, authority)

	// The call comes from 127.0.0.1, the address a token may name.
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)
	callCtx, callCancel := context.WithTimeout(context.Background(), 30*time.Second)

	defer callCancel()

	if _, err := trustdtest.Call(callCtx, client, tok, csr); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("before sync: %v, want FailedPrecondition", err)
	}

	store.Update(func(r *node.Resources) { r.Time = &node.TimeStatus{Synced: true} })

	var resp *security.CertificateResponse

	deadline := time.Now().Add(30 * time.Second)

	for {
		var err error
		if resp, err = trustdtest.Call(callCtx, client, tok, csr); err == nil {
			break
		}

		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("after sync: %v", err)
		}

		time.Sleep(20 * time.Millisecond)
	}

	issued, err := ca.ParseCertificate(resp.Crt)
	if err != nil {
		t.Fatal(err)
	}

	if err := issued.CheckSignatureFrom(authority.Cert); err != nil {
		t.Fatalf("not issued by the node's CA: %v", err)
	}

	// The config's worker names come with the static token...
	named := trustdtest.CSR(t, ca.Ed25519, trustdtest.CallerIP, trustdtest.CallerIP, "worker-1.example")
	if _, err := trustdtest.Call(callCtx, client, tok, named); err != nil {
		t.Fatalf("certificate naming a worker name the config allows: %v", err)
	}

	// ...but the control planes machined names, and the node's own address
	// from its certificate, are never a token's, whatever the patterns.
	for _, host := range []string{"cp-9.example", "127.0.1.4"} {
		_, err := trustdtest.Call(callCtx, client, tok, trustdtest.CSR(t, ca.Ed25519, trustdtest.CallerIP, trustdtest.CallerIP, host))
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("certificate naming %s: %v, want PermissionDenied", host, err)
		}
	}

	cancel()

	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func serveResources(t *testing.T, sock string, store *resources.Store) string {
	t.Helper()

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer()
	node.RegisterNodeServiceServer(g, resources.NewServer(store, resources.TrustdView, resources.NewMembers()))

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	return sock
}

func waitServing(t *testing.T, logs *logtest.Sink) string {
	t.Helper()

	deadline := time.Now().Add(time.Minute)

	for {
		lines := logs.JSONRecords()
		if i := slices.IndexFunc(lines, func(m map[string]any) bool { return m["msg"] == "trustd serving" }); i >= 0 {
			return lines[i]["address"].(string)
		}

		if time.Now().After(deadline) {
			t.Fatalf("trustd did not start; logs:\n%v", lines)
		}

		time.Sleep(10 * time.Millisecond)
	}
}

func dialTrustd(t *testing.T, addr string, authority *ca.CA) security.SecurityServiceClient {
	t.Helper()

	set, err := ca.NewAcceptedSet(time.Now(), authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	creds := credentials.NewTLS(&tls.Config{RootCAs: set.Pool(), ServerName: "127.0.1.4", MinVersion: tls.VersionTLS13})

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return security.NewSecurityServiceClient(conn)
}
