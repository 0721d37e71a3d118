package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/etcdstore"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// killRounds is how many times the kill test kills a service.
const killRounds = 6

// loadCallTimeout bounds one call of the load.
const loadCallTimeout = 10 * time.Second

// cleanCodes are the ways a call may end while its server is killed: it
// succeeded, or it failed as a caller can retry.
var cleanCodes = []codes.Code{codes.OK, codes.Unavailable, codes.DeadlineExceeded}

// load records what the clients of the kill test got.
type load struct {
	mu      sync.Mutex
	codes   map[string]map[codes.Code]int // by kind of call
	created []string                      // ids of tokens whose Create succeeded
	serials []string                      // serials of certificates obtained
	tries   int                           // Certificate calls made
}

func (l *load) record(kind string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.codes[kind] == nil {
		l.codes[kind] = map[codes.Code]int{}
	}

	l.codes[kind][status.Code(err)]++
}

// TestKill9UnderLoad: apid and trustd of a control plane are killed with
// SIGKILL, again and again, while clients call both. Every call succeeds
// or fails as one a client retries; machined restarts both each time; no
// token whose creation succeeded is lost, every certificate handed out is
// valid and audited, uses are counted, and the token store is sound.
func TestKill9UnderLoad(t *testing.T) {
	needBinaries(t)

	c := localCluster(t, "kill", "127.8.6.0/24", 0)
	cp := c.Nodes[0]
	a := clusterAdmin(t, c)
	conn := a.conn(t, cp.Address)
	ctx := testContext(t)

	created, err := tokens.NewTokenServiceClient(conn).Create(ctx, &tokens.CreateRequest{Description: "load"})
	if err != nil {
		t.Fatal(err)
	}

	tok := created.GetMessages()[0].GetToken()
	l := &load{codes: map[string]map[codes.Code]int{}}
	stop := make(chan struct{})

	var wg sync.WaitGroup

	wg.Go(func() { loadAPI(conn, l, stop) })
	wg.Go(func() { loadTokens(conn, l, stop) })
	wg.Go(func() { loadTrustd(t, a, cp.Address, tok, l, stop) })

	for round := range killRounds {
		killService(t, c, cp, []string{"apid", "trustd"}[round%2], a)
		time.Sleep(time.Second)
	}

	close(stop)
	wg.Wait()

	checkLoad(t, l)
	waitFor(t, "the control plane's services up", func() error { return servicesUp(ctx, conn) })
	checkIssuedAudited(t, c, cp, l)
	checkTokensKept(t, c, cp, tok, l)
}

func loadAPI(conn *grpc.ClientConn, l *load, stop <-chan struct{}) {
	mc := machine.NewMachineServiceClient(conn)

	for pause(stop) {
		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		_, err := mc.ServiceList(ctx, &emptypb.Empty{})
		cancel()
		l.record("ServiceList", err)
	}
}

func loadTokens(conn *grpc.ClientConn, l *load, stop <-chan struct{}) {
	tc := tokens.NewTokenServiceClient(conn)

	for pause(stop) {
		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		resp, err := tc.Create(ctx, &tokens.CreateRequest{Description: "made under fire"})
		cancel()
		l.record("TokenService.Create", err)

		if err == nil {
			l.mu.Lock()
			l.created = append(l.created, resp.GetMessages()[0].GetInfo().GetId())
			l.mu.Unlock()
		}
	}
}

func loadTrustd(t *testing.T, a admin, node, tok string, l *load, stop <-chan struct{}) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.8.6.100")}}

	conn, err := grpc.NewClient(net.JoinHostPort(node, strconv.Itoa(wire.TrustdPort)),
		grpc.WithTransportCredentials(credentials.NewTLS(a.tlsFor(node))),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	if err != nil {
		t.Error(err)

		return
	}
	defer conn.Close()

	sc := securityapi.NewSecurityServiceClient(conn)
	csr := trustdtest.SourceCSR(t, ca.Ed25519, "127.8.6.100")

	for pause(stop) {
		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		resp, err := trustdtest.Call(ctx, sc, tok, csr)
		cancel()
		l.record("Certificate", err)

		l.mu.Lock()
		l.tries++

		if err == nil {
			cert, perr := ca.ParseCertificate(resp.GetCrt())
			if perr != nil {
				t.Errorf("a certificate handed out does not parse: %v", perr)
			} else if _, verr := cert.Verify(x509.VerifyOptions{Roots: a.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); verr != nil {
				t.Errorf("a certificate handed out does not verify: %v", verr)
			} else {
				l.serials = append(l.serials, fmt.Sprintf("%x", cert.SerialNumber))
			}
		}
		l.mu.Unlock()
	}
}

// pause waits a little between calls and reports whether to go on.
func pause(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// killService kills the node's process of service with SIGKILL and waits
// until machined has started it again and it serves.
func killService(t *testing.T, c *localcluster.Cluster, n localcluster.Node, service string, a admin) {
	t.Helper()

	pid := nodeServicePID(n, service)
	if pid == 0 {
		t.Fatalf("no %s process under machined", service)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	conn := a.conn(t, n.Address)

	waitFor(t, service+" restarted", func() error {
		if p := nodeServicePID(n, service); p == 0 || p == pid {
			return fmt.Errorf("%s not restarted yet", service)
		}

		ctx, cancel := context.WithTimeout(context.Background(), loadCallTimeout)
		defer cancel()

		return servicesUp(ctx, conn)
	})
}

// nodeServicePID finds the process of service among the node machined's.
func nodeServicePID(n localcluster.Node, service string) int {
	for _, pid := range localcluster.Descendants(n.PID) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}

		if exe, _, _ := strings.Cut(string(cmdline), "\x00"); filepath.Base(exe) == service {
			return pid
		}
	}

	return 0
}

// servicesUp requires every service the node reports to run and be healthy.
func servicesUp(ctx context.Context, conn *grpc.ClientConn) error {
	resp, err := machine.NewMachineServiceClient(conn).ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		return err
	}

	for _, m := range resp.GetMessages() {
		for _, s := range m.GetServices() {
			if s.GetState() != "Running" || !s.GetHealth().GetHealthy() {
				return fmt.Errorf("%s is %s", s.GetId(), s.GetState())
			}
		}
	}

	return nil
}

// checkLoad requires every call to have ended cleanly, and each kind of
// call to have succeeded at least once.
func checkLoad(t *testing.T, l *load) {
	t.Helper()

	for kind, byCode := range l.codes {
		t.Logf("%s: %v", kind, byCode)

		for code := range byCode {
			if !slices.Contains(cleanCodes, code) {
				t.Errorf("%s ended %s %d time(s)", kind, code, byCode[code])
			}
		}

		if byCode[codes.OK] == 0 {
			t.Errorf("no %s call succeeded", kind)
		}
	}
}

// checkIssuedAudited requires an audit record for every certificate the
// load obtained.
func checkIssuedAudited(t *testing.T, c *localcluster.Cluster, n localcluster.Node, l *load) {
	t.Helper()

	issued := map[string]bool{}

	for _, r := range logRecords(t, filepath.Join(c.StatePath(n), "logs", "trustd.log")) {
		if r["log"] == "audit" && r["decision"] == "issued" {
			issued[fmt.Sprint(r["serial"])] = true
		}
	}

	for _, s := range l.serials {
		if !issued[s] {
			t.Errorf("certificate %s was handed out without an audit record", s)
		}
	}
}

// checkTokensKept reads the node's tokens where trustd keeps them (etcd
// once the cluster has it, else the bbolt file), then stops the node and
// opens the bbolt file, which must be sound either way. Every token created
// must be there, with the load token's uses between the certificates
// obtained and those asked for.
func checkTokensKept(t *testing.T, c *localcluster.Cluster, n localcluster.Node, tok string, l *load) {
	t.Helper()

	var recs []tokenstore.Record

	onEtcd := false
	if _, err := os.Stat(filepath.Join(c.StatePath(n), "trustd", "tokens-on-etcd")); err == nil {
		onEtcd = true

		es, err := etcdstore.New(etcdstore.Config{Client: etcdClient(t, c, n)})
		if err != nil {
			t.Fatal(err)
		}

		if recs, err = es.List(context.Background()); err != nil {
			t.Fatalf("tokens in etcd after the kills: %v", err)
		}
	}

	if err := c.StopNode(n.Name); err != nil {
		t.Fatal(err)
	}

	s, err := boltstore.Open(boltstore.Config{Path: filepath.Join(c.StatePath(n), "trustd", "tokens.db")})
	if err != nil {
		t.Fatalf("token store after the kills: %v", err)
	}
	defer s.Close()

	if !onEtcd {
		if recs, err = s.List(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	have := map[string]uint32{}
	for _, r := range recs {
		have[r.ID] = r.Uses
	}

	for _, id := range l.created {
		if _, ok := have[id]; !ok {
			t.Errorf("token %s was created and is gone", id)
		}
	}

	if uses := int(have[tok[:6]]); uses < len(l.serials) || uses > l.tries {
		t.Errorf("load token counts %d uses for %d certificates out of %d calls", uses, len(l.serials), l.tries)
	}
}
