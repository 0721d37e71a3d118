package certs_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/renewal"
)

func TestKeyPairSetKeepsOldOnError(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	iss := catest.NewIssuer(t, authority, testutil.Epoch)
	key := catest.Key(t, ca.Ed25519)
	keyPEM, _ := ca.EncodeKey(key)
	issued := catest.Issue(t, iss, key, ca.ProfileServer, 0)

	kp, err := certs.NewKeyPair(issued.PEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	otherKey, _ := ca.EncodeKey(catest.Key(t, ca.Ed25519))
	if err := kp.Set(issued.PEM, otherKey); err == nil {
		t.Fatal("mismatched key accepted")
	}

	got, err := kp.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || !got.Leaf.Equal(issued.Cert) {
		t.Fatal("old pair lost after a failed Set")
	}

	var empty certs.KeyPair
	if _, err := empty.GetCertificate(nil); err == nil {
		t.Fatal("empty KeyPair served a certificate")
	}
}

func TestWatchFilesReloadsOnRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")

	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}

	clk := clock.NewFake(testutil.Epoch)
	reloads := make(chan struct{}, 10)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	go renewal.WatchFiles(ctx, clk, time.Second, []string{path}, func() error {
		reloads <- struct{}{}

		return nil
	}, slog.New(slog.DiscardHandler))

	waitTimer(t, clk)
	clk.Advance(time.Second) // nothing changed

	waitTimer(t, clk)

	select {
	case <-reloads:
		t.Fatal("reloaded without a change")
	default:
	}

	tmp := filepath.Join(dir, "f.tmp")
	if err := os.WriteFile(tmp, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Second)

	select {
	case <-reloads:
	case <-time.After(5 * time.Second):
		t.Fatal("no reload after the file was replaced")
	}
}

func waitTimer(t *testing.T, clk *clock.Fake) {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal("watcher did not arm its timer")
	}
}
