package scale

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"runtime"
	"sync"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/machined/localcluster"
	"github.com/aegis-os/aegis/token"
)

// fleet is the hollow workers and their shared counters.
type fleet struct {
	workers []*worker
	n       *counters
}

// joinBase is a worker's join configuration as machined's config gives it:
// every control plane as endpoint, in the config's order, the token and
// the OS CA; it returns the OS CA too, for the CPU floor.
func joinBase(c *localcluster.Cluster) (join.Config, *ca.CA, error) {
	now := time.Now()

	bundle, err := certs.LoadBundle(c.SecretsPath(), now)
	if err != nil {
		return join.Config{}, nil, err
	}

	osCA, err := bundle.OSCA(now)
	if err != nil {
		return join.Config{}, nil, err
	}

	cas, err := ca.NewAcceptedSet(now, osCA.Cert)
	if err != nil {
		return join.Config{}, nil, err
	}

	tok, err := token.Parse(bundle.TrustdInfo.Token)
	if err != nil {
		return join.Config{}, nil, err
	}

	var eps []string
	for _, n := range c.ControlPlanes() {
		eps = append(eps, n.Address)
	}

	return join.Config{Endpoints: eps, Token: tok, CAs: cas, CA: osCA.Cert}, osCA, nil
}

// storm makes the hollow workers and lets them all join at once, measuring
// the time until the last held its certificate and the control planes' CPU.
func (r *run) storm(ctx context.Context) error {
	base, osCA, err := joinBase(r.c)
	if err != nil {
		return err
	}

	f := &fleet{n: &counters{}}
	addr := r.cfg.Sources.Masked().Addr()

	for range r.cfg.Workers {
		addr = addr.Next()

		w, err := newWorker(addr.String(), base, f.n, r.log)
		if err != nil {
			return err
		}

		f.workers = append(f.workers, w)
	}

	r.fleet = f
	r.logf("join storm of %d", len(f.workers))

	procs := controlPlaneProcesses(r.c)
	before := cpuByName(procs)
	t0 := time.Now()
	failed := f.joinAll(ctx)
	r.res.Storm = Storm{Total: time.Since(t0), CPU: sumCPU(before, cpuByName(procs)), Failed: failed}
	r.res.Joined = len(f.workers) - failed

	if r.res.Storm.Floor, err = signingFloor(osCA, len(f.workers)); err != nil {
		return err
	}

	r.logf("join storm: %d joined in %s (floor %s)", r.res.Joined, dur(r.res.Storm.Total), dur(r.res.Storm.Floor))

	if r.res.Joined == 0 {
		return fmt.Errorf("no hollow worker joined")
	}

	return nil
}

// joinAll joins every worker at once; those that fail are left out of the
// fleet. It returns how many failed.
func (f *fleet) joinAll(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, stormTimeout)
	defer cancel()

	ok := make([]bool, len(f.workers))

	var wg sync.WaitGroup
	for i, w := range f.workers {
		wg.Go(func() {
			_, err := w.join(ctx)
			ok[i] = err == nil
		})
	}

	wg.Wait()

	kept := f.workers[:0]
	for i, w := range f.workers {
		if ok[i] {
			kept = append(kept, w)
		}
	}

	failed := len(f.workers) - len(kept)
	f.workers = kept

	return failed
}

// start runs every joined worker until ctx ends; the function returned
// waits for them.
func (f *fleet) start(ctx context.Context, log *slog.Logger) func() {
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() { _ = w.run(ctx, heartbeatInterval, log) }) //nolint:errcheck // joined workers only
	}

	return wg.Wait
}

// signingFloor is the in-process wall time of n certificate signatures by
// the OS CA on every core: the least trustd's signing of n joins can take.
func signingFloor(osCA *ca.CA, n int) (time.Duration, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return 0, err
	}

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "floor"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}

	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}

	close(jobs)

	errs := make(chan error, runtime.NumCPU())
	t0 := time.Now()

	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			for range jobs {
				if _, err := x509.CreateCertificate(rand.Reader, tmpl, osCA.Cert, &key.PublicKey, osCA.Key); err != nil {
					errs <- err
					return
				}
			}
		})
	}

	wg.Wait()
	close(errs)

	return time.Since(t0), <-errs
}

// controlPlaneProcesses are every control plane's machined, apid, trustd
// and etcd, keyed "cp1/trustd" (cpN is the node's name).
func controlPlaneProcesses(c *localcluster.Cluster) map[string]int {
	out := map[string]int{}

	for _, n := range c.ControlPlanes() {
		out[n.Name+"/machined"] = n.PID

		for _, pid := range localcluster.Descendants(n.PID) {
			switch name := commOf(pid); name {
			case "apid", "trustd", "etcd":
				out[n.Name+"/"+name] = pid
			}
		}
	}

	return out
}

func cpuByName(procs map[string]int) map[string]time.Duration {
	out := make(map[string]time.Duration, len(procs))
	for k, pid := range procs {
		out[k] = cpuOf(pid)
	}

	return out
}

func sumCPU(before, after map[string]time.Duration) time.Duration {
	var t time.Duration
	for k, v := range after {
		t += max(v-before[k], 0)
	}

	return t
}
