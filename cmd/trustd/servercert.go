package main

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
)

// watchInterval is how often --cert and --key are checked for changes: a
// renewed certificate is picked up within seconds, at the cost of two stat
// calls.
const watchInterval = 5 * time.Second

// serverCert is trustd's own TLS certificate: from files that are watched
// and reloaded, or issued from the CA and renewed at half-life.
type serverCert struct {
	keyPair *certs.KeyPair
	run     func(ctx context.Context) error
}

func newServerCert(opts options, cfg *certs.MachineConfig, iss *ca.Issuer, listen string, log *slog.Logger) (*serverCert, error) {
	if opts.cert != "" {
		kp, err := certs.LoadKeyPairFiles(opts.cert, opts.key)
		if err != nil {
			return nil, err
		}

		return &serverCert{keyPair: kp, run: func(ctx context.Context) error {
			certs.WatchFiles(ctx, clock.Real(), watchInterval, []string{opts.cert, opts.key},
				func() error { return kp.SetFromFiles(opts.cert, opts.key) }, log)

			return nil
		}}, nil
	}

	hosts := serverHosts(cfg, listen)
	kp := &certs.KeyPair{}

	leaf, err := issueServerCert(iss, hosts, kp)
	if err != nil {
		return nil, err
	}

	renewer, err := certs.NewRenewer(certs.RenewerConfig{
		Current: leaf,
		Renew:   func(context.Context) (*x509.Certificate, error) { return issueServerCert(iss, hosts, kp) },
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}

	return &serverCert{keyPair: kp, run: renewer.Run}, nil
}

// issueServerCert issues a 24h server certificate for a new key and puts it
// in kp; on failure kp keeps what it had.
func issueServerCert(iss *ca.Issuer, hosts []string, kp *certs.KeyPair) (*x509.Certificate, error) {
	kt, err := ca.KeyTypeOf(iss.CA().Cert.PublicKey)
	if err != nil {
		kt = ca.Ed25519
	}

	key, err := ca.GenerateKey(kt, nil)
	if err != nil {
		return nil, err
	}

	csrPEM, err := ca.NewCSR(key, "trustd", hosts)
	if err != nil {
		return nil, err
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		return nil, err
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer, TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}

	keyPEM, err := ca.EncodeKey(key)
	if err != nil {
		return nil, err
	}

	if err = kp.Set(issued.PEM, keyPEM); err != nil {
		return nil, err
	}

	return issued.Cert, nil
}

// serverHosts names trustd's certificate: the listen address (unless it is
// a wildcard), 127.0.0.1, the hostname and the config's certSANs.
func serverHosts(cfg *certs.MachineConfig, listen string) []string {
	var hosts []string

	add := func(h string) {
		for _, have := range hosts {
			if have == h {
				return
			}
		}

		hosts = append(hosts, h)
	}

	if host, _, err := net.SplitHostPort(listen); err == nil {
		if addr, err := netip.ParseAddr(host); err == nil && !addr.IsUnspecified() {
			add(addr.String())
		}
	}

	add("127.0.0.1")

	hostname := cfg.Machine.Hostname
	if hostname == "" {
		hostname, _ = os.Hostname()
	}

	// A host name that is not a valid DNS name cannot be a SAN; trustd is
	// then reached by address.
	if hostname != "" && ca.CheckDNSName(hostname) == nil {
		add(hostname)
	}

	for _, san := range cfg.Machine.CertSANs {
		add(san)
	}

	return hosts
}
