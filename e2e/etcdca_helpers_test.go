package e2e

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenWriter creates tokens through each control plane in turn: each is a
// write to etcd by that node's trustd.
type tokenWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	// retried counts writes that failed with Unavailable and succeeded
	// when sent again: a write in flight on a member as it stops can be
	// lost with it (etcd's client resends only what never left), and a
	// client of a rolling restart resends it, as any etcd client must.
	retried atomic.Int64
	mu      sync.Mutex
	failed  []error
}

func startTokenWriter(t *testing.T, a admin, cps []localcluster.Node) *tokenWriter {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	w := &tokenWriter{cancel: cancel}

	var clients []tokens.TokenServiceClient
	for _, cp := range cps {
		clients = append(clients, tokens.NewTokenServiceClient(a.conn(t, cp.Address)))
	}

	w.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			err := w.createAndRevoke(ctx, clients[i%len(clients)])

			switch {
			case err == nil:
				w.ok.Add(1)
			case ctx.Err() == nil:
				w.mu.Lock()
				w.failed = append(w.failed, err)
				w.mu.Unlock()
			}

			// Paced: a revoked token keeps its place in the store until it
			// expires, and the store holds 1000.
			time.Sleep(100 * time.Millisecond)
		}
	})

	return w
}

// createAndRevoke makes a token and revokes it: two writes to etcd, and a
// store that never fills up.
func (w *tokenWriter) createAndRevoke(ctx context.Context, tc tokens.TokenServiceClient) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var resp *tokens.CreateResponse

	err := w.once(ctx, func() (err error) {
		resp, err = tc.Create(ctx, &tokens.CreateRequest{MaxUses: 1, Description: "writer"})

		return err
	})
	if err != nil {
		return err
	}

	id, _, _ := strings.Cut(resp.GetMessages()[0].GetToken(), ".")

	return w.once(ctx, func() error {
		_, err := tc.Revoke(ctx, &tokens.RevokeRequest{Id: id})

		return err
	})
}

// once sends a write, and sends it once more if it failed with
// Unavailable; a second failure is a failure. (A create sent twice may
// leave one unrevoked token behind, which expires; a revoke is idempotent.)
func (w *tokenWriter) once(ctx context.Context, write func() error) error {
	err := write()
	if status.Code(err) != codes.Unavailable {
		return err
	}

	select {
	case <-ctx.Done():
		return err
	case <-time.After(200 * time.Millisecond):
	}

	if err = write(); err == nil {
		w.retried.Add(1)
	}

	return err
}

func (w *tokenWriter) stop() (ok, retried int64, failed []error) {
	w.cancel()
	w.wg.Wait()

	return w.ok.Load(), w.retried.Load(), w.failed
}

// portWatch records when each member's client port refuses connections.
type portWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	downs  []downtime
}

type downtime struct {
	node, port string
	start, end time.Time
	took       time.Duration
}

// watchEtcdPorts watches the client and peer ports of every member: the
// client port closes as etcd begins its graceful stop, the peer port as it
// leaves raft.
func watchEtcdPorts(cps []localcluster.Node) *portWatch {
	ctx, cancel := context.WithCancel(context.Background())
	p := &portWatch{cancel: cancel}

	for _, cp := range cps {
		for _, port := range []string{"client", "peer"} {
			addr := net.JoinHostPort(cp.Address, map[string]string{"client": "2379", "peer": "2380"}[port])

			p.wg.Go(func() { p.watch(ctx, cp.Name, port, addr) })
		}
	}

	return p
}

func (p *portWatch) watch(ctx context.Context, node, port, addr string) {
	var since time.Time

	for ctx.Err() == nil {
		down := portRefuses(addr)

		switch now := time.Now(); {
		case down && since.IsZero():
			since = now
		case !down && !since.IsZero():
			p.mu.Lock()
			p.downs = append(p.downs, downtime{node: node, port: port, start: since, end: now, took: now.Sub(since)})
			p.mu.Unlock()

			since = time.Time{}
		}

		time.Sleep(10 * time.Millisecond)
	}
}

// portRefuses reports whether addr refuses TCP connections: nothing listens.
func portRefuses(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}

	conn.Close()

	return false
}

func (p *portWatch) stop() []downtime {
	p.cancel()
	p.wg.Wait()

	return p.downs
}

// servicePIDs returns the current PID of service id on each node.
func servicePIDs(ctx context.Context, t *testing.T, c *client.Client, nodes []string, id string) map[string]int {
	t.Helper()

	out := map[string]int{}

	for _, node := range nodes {
		resp, err := c.ServiceList(client.WithNode(ctx, node))
		if err != nil {
			t.Fatal(err)
		}

		for _, s := range resp.GetMessages()[0].GetServices() {
			if s.GetId() != id {
				continue
			}

			events := s.GetEvents().GetEvents()
			for i := len(events) - 1; i >= 0 && out[node] == 0; i-- {
				if m := etcdStarted.FindStringSubmatch(events[i].GetMsg()); m != nil {
					out[node], _ = strconv.Atoi(m[1])
				}
			}
		}

		if out[node] == 0 {
			t.Fatalf("no %s process on %s", id, node)
		}
	}

	return out
}
