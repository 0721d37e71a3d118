package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/etcdutil"
	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/metrics"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/timesync"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenapi"
	"github.com/aegis-os/aegis/trustd/tokenauth"
	"github.com/aegis-os/aegis/trustd/tokenstore"
	"github.com/aegis-os/aegis/trustd/tokenstore/boltstore"
)

// tokenCountTimeout bounds the count of the token store at a scrape: on
// etcd, a cluster without quorum must not hold the scrape.
const tokenCountTimeout = 2 * time.Second

// daemon is trustd with everything it runs beside the server.
type daemon struct {
	log    *slog.Logger
	ops    opsLog // the operational log's writer and level, for the audit copies
	listen string
	// listenFD is the inherited socket listening on listen (--listen-fd);
	// zero opens one.
	listenFD int
	certTTL  time.Duration // of the certificates trustd signs
	bolt     *boltstore.Store
	etcd     *clientv3.Client // of the etcd token store, on a control plane running etcd
	leader   *etcdutil.Leader // etcd's leader, for the heartbeats' lease keep-alives; with etcd
	store    tokenstore.Store
	names    *formedNames // the record of node names, beside the etcd token store; nil without etcd
	audit    *auditLogs
	server   *trustd.Server
	tokens   *tokenSocket
	// metrics and endpoint are the Prometheus registry and its server;
	// both nil without --metrics-listen.
	metrics  prometheus.Registerer
	endpoint *metrics.Server
	// background runs beside the server: the time service and the
	// certificate renewal when trustd runs on its own.
	background []func(context.Context) error
	// stop ends what runs before the daemon does (machined's resource watch).
	stop func()
}

// setup builds every component; nothing runs yet.
func setup(opts options, log *slog.Logger) (*daemon, error) {
	cfg, err := certs.LoadMachineConfig(opts.config, time.Now())
	if err != nil {
		return nil, err
	}

	if cfg.OSCA() == nil {
		return nil, fmt.Errorf("%s is a %s config without the CA key; trustd runs on control planes only", opts.config, cfg.Machine.Type)
	}

	d := &daemon{log: log, ops: opts.opsLog(), listen: opts.listen, listenFD: opts.listenFD, certTTL: opts.certTTL}
	if d.listen == "" {
		d.listen = net.JoinHostPort(cfg.Machine.ListenAddress, strconv.Itoa(wire.TrustdPort))
	}

	if err = d.openMetrics(opts.MetricsListen); err != nil {
		return nil, err
	}

	if err = d.build(cfg, opts); err != nil {
		d.close()

		return nil, err
	}

	return d, nil
}

func (d *daemon) build(cfg *certs.MachineConfig, opts options) error {
	if err := d.openStore(opts.state); err != nil {
		return err
	}

	clock, err := timesync.New(timesync.Config{
		Servers: cfg.Machine.Time.Servers, TrustHostClock: cfg.Machine.Time.TrustHostClock,
		MaxOffset: cfg.MaxTimeOffset(), PollInterval: cfg.Machine.Time.PollInterval, Logger: d.log,
	})
	if err != nil {
		return err
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: cfg.OSCA()})
	if err != nil {
		return err
	}

	cert, err := newServerCert(opts, cfg, iss, d.listen, d.log)
	if err != nil {
		return err
	}

	d.background = append(d.background, clock.Run, cert.run)

	if err = d.newServer(cfg, iss, clock, cert.keyPair); err != nil {
		return err
	}

	return d.listenTokens(opts.state)
}

// listenTokens opens the TokenService socket under the state directory.
func (d *daemon) listenTokens(state string) error {
	api, err := tokenapi.New(tokenapi.Config{Store: d.store, Logger: d.audit.audit})
	if err != nil {
		return err
	}

	d.tokens, err = listenTokenSocket(layout.Layout{State: state}.TokensSocket(), api, d.server, d.log)
	if err != nil {
		return err
	}

	return d.registerTokenMetrics()
}

// openMetrics opens the metrics endpoint at addr; "" leaves metrics off.
func (d *daemon) openMetrics(addr string) error {
	reg, endpoint, err := metrics.Open(addr, d.log)
	if err != nil {
		return err
	}

	d.metrics, d.endpoint = reg, endpoint

	return nil
}

// registerTokenMetrics reports the token store's size against its limit,
// read at each scrape.
func (d *daemon) registerTokenMetrics() error {
	if d.metrics == nil {
		return nil
	}

	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metrics.TrustdTokens, Help: "Records in the token store (expired and revoked ones until pruned); NaN when it cannot answer.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), tokenCountTimeout)
		defer cancel()

		records, err := d.store.List(ctx)
		if err != nil {
			return math.NaN()
		}

		return float64(len(records))
	})
	limit := prometheus.NewGauge(prometheus.GaugeOpts{Name: metrics.TrustdTokensLimit, Help: "Most records the token store holds."})
	limit.Set(tokenstore.DefaultMaxRecords)

	for _, c := range []prometheus.Collector{size, limit} {
		if err := d.metrics.Register(c); err != nil {
			return err
		}
	}

	return nil
}

// openStore opens the token store and the audit files in their own 0700
// directory of the state.
func (d *daemon) openStore(state string) error {
	dir := filepath.Join(state, "trustd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	var err error
	if d.audit, err = openAuditLogs(state, d.ops); err != nil {
		return err
	}

	if d.bolt, err = boltstore.Open(boltstore.Config{Path: filepath.Join(dir, "tokens.db")}); err != nil {
		return err
	}

	d.store = d.bolt

	return nil
}

func (d *daemon) newServer(cfg *certs.MachineConfig, iss *ca.Issuer, gate trustd.TimeGate, kp *certs.KeyPair) error {
	// Validated with the config.
	workerSANs, err := sanpolicy.Parse(cfg.Cluster.WorkerSANs)
	if err != nil {
		return err
	}

	previous := make([]tokenauth.Previous, 0, len(cfg.PreviousTrustdTokens()))
	for _, p := range cfg.PreviousTrustdTokens() {
		previous = append(previous, tokenauth.Previous{Token: p.Token, Expires: p.Expires})
	}

	auth, err := tokenauth.New(tokenauth.Config{Static: cfg.TrustdToken(), StaticSANs: workerSANs, Previous: previous, Store: d.store})
	if err != nil {
		return err
	}

	d.server, err = trustd.New(trustd.Config{
		Signer: iss, CAs: cfg, Authenticator: auth, TimeGate: gate, Certificate: kp, ControlPlanes: controlPlanes(cfg.Cluster.ControlPlane.Endpoints),
		Audit: d.audit.audit, Refusals: d.audit.refusals, Logger: d.log, CertTTL: d.certTTL, Metrics: d.metrics,
	})

	return err
}

// controlPlanes are the hosts of the config's control-plane endpoints;
// trustd adds its own addresses and names from its server certificate.
type controlPlanes []string

func (c controlPlanes) ControlPlaneHosts() []string { return c }

// listener is the socket inherited as --listen-fd, or a new one on the
// listen address.
func (d *daemon) listener() (net.Listener, error) {
	if d.listenFD != 0 {
		return inherit.Listener(d.listenFD, d.listen)
	}

	return net.Listen("tcp", d.listen)
}

// run serves until ctx ends or a component fails, then stops them all.
func (d *daemon) run(ctx context.Context) error {
	lis, err := d.listener()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)

	for _, run := range d.background {
		g.Go(func() error { return run(ctx) })
	}

	g.Go(func() error { return d.tokens.serve(ctx) })
	g.Go(func() error { return d.endpoint.Serve(ctx) })
	g.Go(func() error { return d.server.Serve(ctx, lis) })

	err = g.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}

	d.log.Info("trustd stopped")

	return nil
}

// close releases what setup acquired; after run it finds the socket
// already closed and only the store and the audit files left.
func (d *daemon) close() {
	if d.stop != nil {
		d.stop()
	}

	if d.tokens != nil {
		_ = d.tokens.lis.Close()
	}

	_ = d.endpoint.Close()

	if d.leader != nil {
		_ = d.leader.Close()
	}

	if d.etcd != nil {
		_ = d.etcd.Close()
	}

	if d.bolt != nil {
		if err := d.bolt.Close(); err != nil {
			d.log.Error("closing the token store", slog.String(logkey.Error, err.Error()))
		}
	}

	if d.audit != nil {
		if err := d.audit.close(); err != nil {
			d.log.Error("closing the audit files", slog.String(logkey.Error, err.Error()))
		}
	}
}
