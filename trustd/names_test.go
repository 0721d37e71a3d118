package trustd_test

import (
	"crypto/x509"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestNamesOfNodes: a token obtains the node's own single name when no
// control plane and no other node holds it; the name is then bound to the
// node's address until its certificate expires, so another address is
// refused it and the node itself renews with it. A token with DNS patterns
// obtains only names they match; one without obtains a single name.
func TestNamesOfNodes(t *testing.T) {
	names := trustdtest.NewNames(nil, "cp-3")
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true, ControlPlanes: []string{"cp-1.example:50001"}, Names: names})
	ctx := testContext(t)
	restricted := env.CreateToken(t, time.Hour, 0, "node-*.example")

	call := func(source, tok, cn string, hosts ...string) (*x509.Certificate, error) {
		resp, err := trustdtest.Call(ctx, env.Client(t, source), tok, trustdtest.CSR(t, ca.Ed25519, cn, hosts...))
		if err != nil {
			return nil, err
		}

		return checkNodeCertificate(t, env, resp), nil
	}

	t.Run("own name", func(t *testing.T) {
		cert, err := call("127.0.1.10", trustdtest.StaticToken, "127.0.1.10", "127.0.1.10", "Worker-1")
		if err != nil {
			t.Fatal(err)
		}

		if !slices.Equal(cert.DNSNames, []string{"Worker-1"}) {
			t.Fatalf("DNS names %v", cert.DNSNames)
		}

		b, ok := names.Bound("worker-1")
		if !ok || !slices.Contains(b.Addresses, netip.MustParseAddr("127.0.1.10")) {
			t.Fatalf("binding of worker-1: %+v, %v", b, ok)
		}
	})

	for _, tt := range []struct {
		name, source, tok, cn string
		hosts                 []string
		code                  codes.Code
		want                  string // in the message
	}{
		{"a control plane's name (etcd)", "127.0.1.11", trustdtest.StaticToken, "127.0.1.11", []string{"127.0.1.11", "CP-3"}, codes.PermissionDenied, "cp-3 (a control plane of the cluster holds it)"},
		{"a control plane's name (config)", "127.0.1.11", trustdtest.StaticToken, "127.0.1.11", []string{"127.0.1.11", "cp-1.example"}, codes.PermissionDenied, "cp-1.example"},
		{"a control plane's name as common name", "127.0.1.11", trustdtest.StaticToken, "cp-3", []string{"127.0.1.11"}, codes.PermissionDenied, "cp-3"},
		{"another node's name", "127.0.1.11", trustdtest.StaticToken, "127.0.1.11", []string{"127.0.1.11", "worker-1"}, codes.PermissionDenied, "worker-1 is bound to the node at [127.0.1.10]"},
		{"two names without patterns", "127.0.1.12", trustdtest.StaticToken, "127.0.1.12", []string{"127.0.1.12", "worker-2", "worker-2b"}, codes.InvalidArgument, "obtains one, the node's own"},
		{"a name outside the token's patterns", "127.0.1.13", restricted, "127.0.1.13", []string{"127.0.1.13", "worker-3"}, codes.InvalidArgument, `"worker-3"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(tt.source, tt.tok, tt.cn, tt.hosts...)
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %s naming %q", err, tt.code, tt.want)
			}
		})
	}

	if b, _ := names.Bound("worker-1"); !slices.Equal(b.Addresses, []netip.Addr{netip.MustParseAddr("127.0.1.10")}) {
		t.Fatalf("a refused request changed the binding: %+v", b)
	}

	t.Run("renewal from the holder's address", func(t *testing.T) {
		if _, err := call("127.0.1.10", trustdtest.StaticToken, "127.0.1.10", "127.0.1.10", "worker-1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a name within the token's patterns", func(t *testing.T) {
		if _, err := call("127.0.1.14", restricted, "127.0.1.14", "127.0.1.14", "node-4.example"); err != nil {
			t.Fatal(err)
		}

		// Bound like any other: the pattern allows the name, not another
		// node's.
		_, err := call("127.0.1.15", restricted, "127.0.1.15", "127.0.1.15", "node-4.example")
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("a bound name through a pattern: %v, want PermissionDenied", err)
		}
	})
}
