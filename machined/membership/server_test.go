package membership_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/clock"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
)

// recorder is a Writer that keeps what it was given.
type recorder struct {
	got     *membershippkg.Member
	role    string
	deleted string
}

func (r *recorder) Delete(_ context.Context, address, role string) error {
	r.deleted, r.role = address, role

	return nil
}

func (r *recorder) Put(_ context.Context, m *membershippkg.Member, role string) error {
	r.got, r.role = m, role

	return nil
}

// issue makes a TLS certificate of profile naming hosts (addresses and
// DNS names), signed by iss.
func issue(t *testing.T, iss *ca.Issuer, profile ca.Profile, hosts ...string) tls.Certificate {
	t.Helper()

	key := catest.Key(t, ca.Ed25519)

	tmpl := &x509.CertificateRequest{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}

	csr, err := ca.ParseCSR(catest.CSR(t, key, tmpl))
	if err != nil {
		t.Fatal(err)
	}

	var roles role.Set
	if profile == ca.ProfileClient {
		roles = role.NewSet(role.Admin)
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: profile, Roles: roles, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	return tls.Certificate{Certificate: [][]byte{issued.Cert.Raw}, PrivateKey: key, Leaf: issued.Cert}
}

// TestHeartbeatNeedsTheNodesOwnCertificate: only a node certificate of the
// cluster that names the entry's hostname and every address of the entry
// records it, as a worker's; no certificate, another CA's, a person's
// client certificate, another node's addresses or a name the certificate
// does not carry are refused.
func TestHeartbeatNeedsTheNodesOwnCertificate(t *testing.T) {
	now := time.Now()
	clusterCA, otherCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)
	iss, other := catest.NewIssuer(t, clusterCA, now), catest.NewIssuer(t, otherCA, now)

	pool := x509.NewCertPool()
	pool.AddCert(clusterCA.Cert)

	rec := &recorder{}
	clk := clock.NewFake(now)
	var released []string // names and addresses Leave released, in order

	srv := membershippkg.NewServer(membershippkg.ServerConfig{
		Writer: rec, AcceptedCAs: func() *x509.CertPool { return pool }, Clock: clk,
		Release: func(_ context.Context, names, addresses []string) error {
			released = append(slices.Clone(names), addresses...)

			return nil
		},
	})

	serverCert := issue(t, iss, ca.ProfileServer, "127.0.0.1")
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS13,
	})))
	srv.Register(g)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	go g.Serve(lis) //nolint:errcheck // stopped below
	t.Cleanup(g.Stop)

	heartbeat := func(cert *tls.Certificate, m *membershippkg.Member) error {
		cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}

		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()

		_, err = membership.NewMembershipServiceClient(conn).Heartbeat(context.Background(), &membership.HeartbeatRequest{Member: m})

		return err
	}

	node := issue(t, iss, ca.ProfileServer, "10.0.0.5", "worker-1")
	nameless := issue(t, iss, ca.ProfileServer, "10.0.0.5")
	stranger := issue(t, other, ca.ProfileServer, "10.0.0.5")
	person := issue(t, iss, ca.ProfileClient)

	for _, tt := range []struct {
		name string
		cert *tls.Certificate
		m    *membershippkg.Member
		code codes.Code
	}{
		{"no certificate", nil, entry("worker-1", "10.0.0.5"), codes.Unauthenticated},
		{"another CA's node", &stranger, entry("worker-1", "10.0.0.5"), codes.Unauthenticated},
		{"a person's client certificate", &person, entry("worker-1", "10.0.0.5"), codes.Unauthenticated},
		{"another node's address", &node, entry("worker-1", "10.0.0.5", "10.0.0.6"), codes.PermissionDenied},
		{"malformed entry", &node, entry("worker_1", "10.0.0.5"), codes.InvalidArgument},
		{"a name the certificate does not carry", &node, entry("cp-1", "10.0.0.5"), codes.PermissionDenied},
		{"a certificate without a name", &nameless, entry("worker-1", "10.0.0.5"), codes.PermissionDenied},
		{"own name in another case", &node, entry("Worker-1", "10.0.0.5"), codes.InvalidArgument},
		{"own entry", &node, entry("worker-1", "10.0.0.5"), codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec.got = nil

			err := heartbeat(tt.cert, tt.m)
			if status.Code(err) != tt.code {
				t.Fatalf("Heartbeat: %v, want %s", err, tt.code)
			}

			if (rec.got != nil) != (tt.code == codes.OK) {
				t.Fatalf("recorded %v", rec.got)
			}

			if tt.code == codes.OK && rec.role != membershippkg.RoleWorker {
				t.Fatalf("recorded as %q, want worker", rec.role)
			}
		})
	}

	t.Run("the name recorded as proven", func(t *testing.T) {
		var got string

		srv := membershippkg.NewServer(membershippkg.ServerConfig{
			Writer: rec, AcceptedCAs: func() *x509.CertPool { return pool }, Clock: clk,
			Names: func(_ context.Context, hostname string, addresses []string, notAfter time.Time) error {
				if got = hostname; hostname == "worker-1" && notAfter.Equal(node.Leaf.NotAfter) && addresses[0] == "10.0.0.5" {
					return errors.Join(membershippkg.ErrNotOwner, errors.New("another node's certificate carries it"))
				}

				return nil
			},
		})

		conn := serveOverTLS(t, srv, serverCert, pool, node)

		rec.got = nil

		_, err := membership.NewMembershipServiceClient(conn).Heartbeat(context.Background(), &membership.HeartbeatRequest{Member: entry("worker-1", "10.0.0.5")})
		if status.Code(err) != codes.PermissionDenied || got != "worker-1" || rec.got != nil {
			t.Fatalf("Heartbeat with the name held elsewhere: %v (recorded %q, entry %v), want PermissionDenied and no entry", err, got, rec.got)
		}
	})

	t.Run("heartbeats too frequent", func(t *testing.T) {
		if err := heartbeat(&node, entry("worker-1", "10.0.0.5")); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("second heartbeat at once: %v, want ResourceExhausted", err)
		}

		clk.Advance(membershippkg.MinHeartbeatSpacing)

		if err := heartbeat(&node, entry("worker-1", "10.0.0.5")); err != nil {
			t.Fatalf("heartbeat after the spacing: %v", err)
		}
	})

	t.Run("Leave of the node's own entry only", func(t *testing.T) {
		leave := func(cert *tls.Certificate, address string) error {
			cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
			if cert != nil {
				cfg.Certificates = []tls.Certificate{*cert}
			}

			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()

			_, err = membership.NewMembershipServiceClient(conn).Leave(context.Background(), &membership.LeaveRequest{Address: address})

			return err
		}

		for _, tt := range []struct {
			name    string
			cert    *tls.Certificate
			address string
			code    codes.Code
		}{
			{"no certificate", nil, "10.0.0.5", codes.Unauthenticated},
			{"another CA's node", &stranger, "10.0.0.5", codes.Unauthenticated},
			{"another node's address", &node, "10.0.0.6", codes.PermissionDenied},
			{"not an address", &node, "10.0.0.05", codes.InvalidArgument},
			{"own entry", &node, "10.0.0.5", codes.OK},
		} {
			rec.deleted, released = "", nil

			if err := leave(tt.cert, tt.address); status.Code(err) != tt.code {
				t.Fatalf("%s: Leave: %v, want %s", tt.name, err, tt.code)
			}

			// The names the certificate proves are released with its
			// addresses, and only by a Leave that removed the entry.
			if want := []string{"worker-1", "10.0.0.5"}; tt.code == codes.OK != slices.Equal(released, want) {
				t.Fatalf("%s: released %v, want %v only when the entry was removed", tt.name, released, want)
			}

			if (rec.deleted != "") != (tt.code == codes.OK) || (tt.code == codes.OK && rec.role != membershippkg.RoleWorker) {
				t.Fatalf("%s: deleted %q as %q", tt.name, rec.deleted, rec.role)
			}
		}
	})

	t.Run("List without a member list", func(t *testing.T) {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()

		_, err = membership.NewMembershipServiceClient(conn).List(context.Background(), &membership.ListRequest{})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("List: %v, want FailedPrecondition", err)
		}
	})
}

// holdRecorder is a Writer and Holder that keeps what it was given.
type holdRecorder struct {
	recorder

	held  *membershippkg.Member
	terms membershippkg.HoldTerms
}

func (r *holdRecorder) Hold(_ context.Context, m *membershippkg.Member, role string, terms membershippkg.HoldTerms) error {
	r.held, r.role, r.terms = m, role, terms

	return nil
}

// TestHeartbeatHeld: a heartbeat on a connection the server knows is held
// by a Holder for that connection, bound to the certificate's expiry, and
// its answer says for how long; without the connection, or with a Writer
// that cannot hold, it is put as before and the answer gives no hold.
func TestHeartbeatHeld(t *testing.T) {
	now := time.Now()
	clusterCA := catest.NewCA(t, ca.Ed25519, now)
	iss := catest.NewIssuer(t, clusterCA, now)

	pool := x509.NewCertPool()
	pool.AddCert(clusterCA.Cert)

	node := issue(t, iss, ca.ProfileServer, "10.0.0.5", "worker-1")
	serverCert := issue(t, iss, ca.ProfileServer, "127.0.0.1")
	connCtx, closeConn := context.WithCancel(context.Background())
	defer closeConn()

	for _, tt := range []struct {
		name   string
		writer membershippkg.Writer
		known  bool
		held   bool
	}{
		{"a holder, the connection known", &holdRecorder{}, true, true},
		{"a holder, the connection unknown", &holdRecorder{}, false, false},
		{"a writer that cannot hold", &recorder{}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := membershippkg.NewServer(membershippkg.ServerConfig{
				Writer: tt.writer, AcceptedCAs: func() *x509.CertPool { return pool }, Clock: clock.NewFake(now),
				Connection: func(context.Context) (context.Context, bool) { return connCtx, tt.known },
			})

			conn := serveOverTLS(t, srv, serverCert, pool, node)

			resp, err := membership.NewMembershipServiceClient(conn).Heartbeat(context.Background(),
				&membership.HeartbeatRequest{Member: entry("worker-1", "10.0.0.5")})
			if err != nil {
				t.Fatal(err)
			}

			if got := resp.GetHold().AsDuration(); (got == membershippkg.HoldFor) != tt.held || !tt.held && resp.Hold != nil {
				t.Fatalf("hold %v, want held %v", resp.GetHold(), tt.held)
			}

			h, isHolder := tt.writer.(*holdRecorder)

			switch {
			case tt.held && (h.held == nil || h.got != nil || h.terms.Closing != connCtx || !h.terms.NotAfter.Equal(node.Leaf.NotAfter)):
				t.Fatalf("held %v put %v terms %+v", h.held, h.got, h.terms)
			case !tt.held && isHolder && (h.held != nil || h.got == nil):
				t.Fatalf("held %v put %v", h.held, h.got)
			case !tt.held && !isHolder && tt.writer.(*recorder).got == nil:
				t.Fatal("not put")
			}
		})
	}
}

// serveOverTLS serves srv over TLS with serverCert, asking for a client
// certificate as trustd does, until the test ends, and returns a
// connection to it presenting client.
func serveOverTLS(t *testing.T, srv *membershippkg.Server, serverCert tls.Certificate, roots *x509.CertPool, client tls.Certificate) *grpc.ClientConn {
	t.Helper()

	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS13,
	})))
	srv.Register(g)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	go g.Serve(lis) //nolint:errcheck // stopped at cleanup
	t.Cleanup(g.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{client},
	})))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = conn.Close() })

	return conn
}
