package trustd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/timesync"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestServerCertificateSwap: a certificate replaced in the key pair is served
// to the next handshake, without a restart.
func TestServerCertificateSwap(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	first := servedCertificate(t, env)

	if err := env.KeyPair.Set(trustdtest.ServerCertificate(t, env.CA, trustdtest.ListenIP)); err != nil {
		t.Fatal(err)
	}

	second := servedCertificate(t, env)
	if bytes.Equal(first, second) || !bytes.Equal(second, env.KeyPair.Certificate().Leaf.Raw) {
		t.Fatal("the new certificate is not served")
	}
}

func servedCertificate(t *testing.T, env *trustdtest.Env) []byte {
	t.Helper()

	conn, err := tls.Dial("tcp", env.Addr, &tls.Config{RootCAs: env.CAs.Pool(), ServerName: trustdtest.ListenIP, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	return conn.ConnectionState().PeerCertificates[0].Raw
}

func TestNewRefusals(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, time.Now())
	iss := catest.NewIssuer(t, authority, time.Now())
	full := func() trustd.Config {
		return trustd.Config{
			Signer:        iss,
			CAs:           staticCAs{},
			Authenticator: nopAuth{},
			TimeGate:      timesync.NewGate(true),
			Certificate:   trustdtest.ServerKeyPair(t, authority, "127.0.1.1"),
		}
	}

	tests := []struct {
		name   string
		change func(*trustd.Config)
		want   string
	}{
		{name: "no signer", change: func(c *trustd.Config) { c.Signer = nil }, want: "Signer"},
		{name: "no gate, no certificate", change: func(c *trustd.Config) { c.TimeGate, c.Certificate = nil, nil }, want: "[TimeGate Certificate]"},
		{name: "lifetime over a day", change: func(c *trustd.Config) { c.CertTTL = 25 * time.Hour }, want: "lifetime"},
		{name: "lifetime under a minute", change: func(c *trustd.Config) { c.CertTTL = 30 * time.Second }, want: "lifetime"},
		{name: "negative lifetime", change: func(c *trustd.Config) { c.CertTTL = -time.Hour }, want: "lifetime"},
		{name: "negative burst", change: func(c *trustd.Config) { c.RateLimit.Burst = -1 }, want: "rate limit"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := full()
			tt.change(&cfg)

			if _, err := trustd.New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}

	if _, err := trustd.New(full()); err != nil {
		t.Fatalf("complete config refused: %v", err)
	}
}

type staticCAs struct{}

func (staticCAs) AcceptedCAs() *ca.AcceptedSet { return nil }

type nopAuth struct{}

func (nopAuth) Authenticate(context.Context, token.Token) (trustd.Grant, error) {
	return trustd.Grant{}, trustd.ErrInvalidToken
}

func (nopAuth) Consume(context.Context, trustd.Grant) error { return trustd.ErrInvalidToken }
