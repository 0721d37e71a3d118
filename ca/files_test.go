package ca_test

import (
	"bytes"
	"crypto"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestKeyAndCSRFiles(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "ops.key")

	key, keyPEM, err := ca.NewKeyPEM(ca.ECDSAP256, nil)
	if err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	loaded, err := ca.LoadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}

	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(loaded.Public()) {
		t.Fatal("the key read back is not the key written")
	}

	if _, err = ca.NewCheckedCSR(key, "ops", []string{"10.0.0.5", "ops.example"}); err != nil {
		t.Fatal(err)
	}

	if _, err = ca.NewCheckedCSR(key, "ops", []string{"*.example"}); err == nil {
		t.Fatal("a wildcard SAN passed the signer's checks")
	}

	bad := filepath.Join(dir, "bad.key")
	if err = os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err = ca.LoadKeyFile(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Fatalf("err %v, want one naming %s", err, bad)
	}

	if _, err = ca.LoadKeyFile(filepath.Join(dir, "missing.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want not exist", err)
	}

	big := filepath.Join(dir, "big.key")
	if err = os.WriteFile(big, bytes.Repeat([]byte("x"), ca.MaxPEMSize+1), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err = ca.LoadKeyFile(big); !errors.Is(err, &ca.Error{Reason: ca.ReasonTooLarge}) {
		t.Fatalf("err %v, want too large", err)
	}
}

func TestSignCSRFile(t *testing.T) {
	dir := t.TempDir()
	crtPath, keyPath, csrPath := filepath.Join(dir, "root.crt"), filepath.Join(dir, "root.key"), filepath.Join(dir, "ops.csr")

	if err := catest.NewCA(t, ca.Ed25519, testutil.Epoch).WriteFiles(crtPath, keyPath, false); err != nil {
		t.Fatal(err)
	}

	csrPEM, err := ca.NewCheckedCSR(catest.Key(t, ca.Ed25519), "ops", []string{"ops.example"})
	if err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(csrPath, csrPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	clock := catest.FixedClock(testutil.Epoch.Add(time.Hour))
	req := ca.Request{Profile: ca.ProfileClient, Roles: role.NewSet(role.Reader), TTL: 720 * time.Hour}

	issued, err := ca.SignCSRFile(crtPath, keyPath, csrPath, req, clock)
	if err != nil {
		t.Fatal(err)
	}

	if got := issued.Cert.NotAfter.Sub(issued.Cert.NotBefore); got != 720*time.Hour {
		t.Errorf("lifetime %s, want 720h", got)
	}

	if nb := issued.Cert.NotBefore; nb.After(clock.Now()) || nb.Before(clock.Now().Add(-ca.ClockSkew)) {
		t.Errorf("valid from %s: not the clock's time %s", nb, clock.Now())
	}

	if _, err = ca.SignCSRFile(crtPath, keyPath, keyPath, req, clock); err == nil || !strings.HasPrefix(err.Error(), keyPath+": ") {
		t.Errorf("a key as CSR: err %v, want one naming %s", err, keyPath)
	}

	if _, err = ca.SignCSRFile(csrPath, keyPath, csrPath, req, clock); err == nil {
		t.Error("a CSR as the CA certificate signed")
	}
}
