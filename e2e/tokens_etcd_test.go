package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// tokenJoiners is how many joiners race for one single-use token, spread
// over the control planes.
const tokenJoiners = 100

// TestTokensOnEtcd runs one cluster of three control planes: the tokens
// are the cluster's, kept in etcd, not each control plane's own. A token
// made through one control plane joins through another; a single-use token
// raced by joiners on all three yields one certificate; a revocation on one
// is refused on the others; and a control plane that lost quorum refuses
// stored tokens with Unavailable while the machine config's token works,
// and records no client-certificate revocation (Unavailable).
func TestTokensOnEtcd(t *testing.T) {
	c := etcdCluster(t, "tokens", "127.9.12.0/24", 3, 0, false)
	a := clusterAdmin(t, c)
	cps := c.ControlPlanes()

	t.Run("made on one, used on another", func(t *testing.T) {
		tok := createClusterToken(t, a, cps[0], 0)

		eventually(t, "a join through "+cps[1].Name, func() error {
			_, err := joinAt(t, a, cps[1], "127.9.12.200", tok)

			return err
		})
	})

	t.Run("single-use token raced on every control plane", func(t *testing.T) {
		checkSingleUseRace(t, a, cps, func(i int) string { return fmt.Sprintf("127.9.13.%d", 10+i) })
	})

	t.Run("revoked on one, refused on the others", func(t *testing.T) {
		checkRevocation(t, a, cps)
	})

	t.Run("lost quorum fails closed", func(t *testing.T) { checkLostQuorum(t, c, a, cps) })
}

func createClusterToken(t *testing.T, a admin, cp localcluster.Node, uses uint32) string {
	t.Helper()

	return createToken(etcdCtx(t), t, tokens.NewTokenServiceClient(a.conn(t, cp.Address)),
		&tokens.CreateRequest{MaxUses: uses, Description: "cluster token"})
}

// joinAt asks cp's trustd for a certificate from source, as a joining node.
func joinAt(t *testing.T, a admin, cp localcluster.Node, source, tok string) (*securityapi.CertificateResponse, error) {
	t.Helper()

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}

	conn, err := grpc.NewClient(net.JoinHostPort(cp.Address, strconv.Itoa(wire.TrustdPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(a.tlsFor(cp.Address))),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	return trustdtest.Call(ctx, securityapi.NewSecurityServiceClient(conn), tok, trustdtest.SourceCSR(t, ca.Ed25519, source))
}

// checkSingleUseRace lets tokenJoiners joiners, joiner i calling from
// source(i), race for one single-use token over the control planes.
func checkSingleUseRace(t *testing.T, a admin, cps []localcluster.Node, source func(int) string) {
	tok := createClusterToken(t, a, cps[2], 1)

	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		got   = map[codes.Code]int{}
		where = map[string]int{}
	)

	for i := range tokenJoiners {
		cp := cps[i%len(cps)]
		from := source(i)

		wg.Go(func() {
			_, err := joinAt(t, a, cp, from, tok)

			mu.Lock()
			defer mu.Unlock()

			got[status.Code(err)]++
			if err == nil {
				where[cp.Name]++
			}
		})
	}

	wg.Wait()
	t.Logf("single-use token, %d joiners over %d control planes: %v, issued by %v", tokenJoiners, len(cps), got, where)

	if got[codes.OK] != 1 || got[codes.Unauthenticated] != tokenJoiners-1 {
		t.Fatalf("answers %v, want 1 certificate and %d Unauthenticated", got, tokenJoiners-1)
	}
}

// checkRevocation revokes a token on one control plane and measures how
// long until the others refuse it (reported, not asserted tightly).
func checkRevocation(t *testing.T, a admin, cps []localcluster.Node) {
	tok := createClusterToken(t, a, cps[0], 0)
	id, _, _ := strings.Cut(tok, ".")

	eventually(t, "a join before the revocation", func() error {
		_, err := joinAt(t, a, cps[2], "127.9.12.201", tok)

		return err
	})

	if _, err := tokens.NewTokenServiceClient(a.conn(t, cps[0].Address)).Revoke(etcdCtx(t), &tokens.RevokeRequest{Id: id}); err != nil {
		t.Fatal(err)
	}

	revoked := time.Now()

	for i, cp := range cps[1:] {
		deadline := revoked.Add(10 * time.Second)

		for {
			_, err := joinAt(t, a, cp, fmt.Sprintf("127.9.12.%d", 210+i), tok)
			if status.Code(err) == codes.Unauthenticated {
				t.Logf("revoked on %s, refused on %s after %s", cps[0].Name, cp.Name, time.Since(revoked).Round(time.Millisecond))

				break
			}

			if time.Now().After(deadline) {
				t.Fatalf("%s still answers %v for a token revoked on %s 10s ago", cp.Name, err, cps[0].Name)
			}

			time.Sleep(50 * time.Millisecond)
		}
	}
}

// checkLostQuorum stops two control planes: the third's etcd has no
// quorum, so its trustd refuses a stored token with Unavailable and says
// why, and still signs for the machine config's token.
func checkLostQuorum(t *testing.T, c *localcluster.Cluster, a admin, cps []localcluster.Node) {
	tok := createClusterToken(t, a, cps[0], 0)

	mc, err := certs.LoadMachineConfig(c.ConfigPath(cps[0]), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	static := mc.TrustdToken().Reveal()

	for _, n := range cps[1:] {
		if err = c.StopNode(n.Name); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, "a stored token refused with Unavailable", func() error {
		_, err := joinAt(t, a, cps[0], "127.9.12.220", tok)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "etcd") {
			return fmt.Errorf("%v, want Unavailable naming etcd", err)
		}

		return nil
	})

	if _, err = joinAt(t, a, cps[0], "127.9.12.221", static); err != nil {
		t.Fatalf("the machine config's token without quorum: %v", err)
	}

	checkRevokeWithoutQuorum(t, a, cps[0])
}
