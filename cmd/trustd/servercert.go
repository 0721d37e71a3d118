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
	"github.com/aegis-os/aegis/renewal"
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
			renewal.WatchFiles(ctx, clock.Real(), watchInterval, []string{opts.cert, opts.key},
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

	renewer, err := renewal.New(renewal.Config{
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
	issued, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{CommonName: "trustd", Hosts: hosts, Profile: ca.ProfileServer, TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}

	if err = kp.Set(issued.PEM, keyPEM); err != nil {
		return nil, err
	}

	return issued.Cert, nil
}

// serverHosts names trustd's certificate (ca.ServerHosts): the listen
// address unless it is a wildcard, and the config's hostname or else the
// system's.
func serverHosts(cfg *certs.MachineConfig, listen string) []string {
	var addresses []string

	if host, _, err := net.SplitHostPort(listen); err == nil {
		if addr, err := netip.ParseAddr(host); err == nil && !addr.IsUnspecified() {
			addresses = append(addresses, addr.String())
		}
	}

	hostname := cfg.Machine.Hostname
	if hostname == "" {
		hostname, _ = os.Hostname()
	}

	return ca.ServerHosts(ca.CanonicalName(hostname), addresses, cfg.Machine.CertSANs)
}
