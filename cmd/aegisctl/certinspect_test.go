package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCertificateInspect(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }

	for _, args := range [][]string{
		{"gen", "ca", "--name", at("ca")},
		{"gen", "key", "--name", at("admin"), "--key-type", "ecdsa-p256"},
		{"gen", "csr", "--key", at("admin.key"), "--ip", "10.0.0.5", "--dns", "a.example"},
		{"gen", "crt", "--ca", at("ca"), "--csr", at("admin.csr"), "--name", at("admin"), "--roles", "os:reader"},
	} {
		if _, _, err := runCLI(t, time.Now(), args...); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}

	inspect := func(t *testing.T, file string) pemDoc {
		t.Helper()

		out, _, err := runCLI(t, time.Now(), "certificate", "inspect", at(file), "-o", "json")
		if err != nil {
			t.Fatalf("inspect %s: %v", file, err)
		}

		var docs []pemDoc
		if err = json.Unmarshal([]byte(out), &docs); err != nil || len(docs) != 1 {
			t.Fatalf("inspect %s: %d docs, %v\n%s", file, len(docs), err, out)
		}

		return docs[0]
	}

	key, csr, crt, caCrt := inspect(t, "admin.key"), inspect(t, "admin.csr"), inspect(t, "admin.crt"), inspect(t, "ca.crt")

	if key.Kind != "private key" || key.Key != "ECDSA P-256" || key.Subject != "" {
		t.Errorf("key = %+v", key)
	}

	if csr.Kind != "certificate request" || strings.Join(csr.SANs, ",") != "a.example,10.0.0.5" {
		t.Errorf("csr = %+v", csr)
	}

	if crt.Kind != "certificate" || strings.Join(crt.Roles, ",") != "os:reader" || crt.IsCA ||
		crt.Issuer != caCrt.Subject || crt.Expired || !strings.HasPrefix(crt.Fingerprint, "sha256:") {
		t.Errorf("crt = %+v", crt)
	}

	if !caCrt.IsCA || len(caCrt.Roles) != 0 {
		t.Errorf("ca = %+v", caCrt)
	}

	if key.PublicKeyFingerprint == "" || key.PublicKeyFingerprint != csr.PublicKeyFingerprint ||
		key.PublicKeyFingerprint != crt.PublicKeyFingerprint || key.PublicKeyFingerprint == caCrt.PublicKeyFingerprint {
		t.Errorf("public key fingerprints: key %s, csr %s, crt %s, ca %s",
			key.PublicKeyFingerprint, csr.PublicKeyFingerprint, crt.PublicKeyFingerprint, caCrt.PublicKeyFingerprint)
	}

	out, _, err := runCLI(t, time.Now(), "certificate", "inspect", at("admin.crt"))
	if err != nil || !strings.Contains(out, "Roles:") || !strings.Contains(out, crt.Fingerprint) {
		t.Errorf("table: %v\n%s", err, out)
	}

	refused := map[string]string{
		"none.pem":    "not a PEM file",
		"unknown.pem": "-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n",
	}
	want := map[string]string{"none.pem": "no PEM block found", "unknown.pem": `unknown PEM type "FOO"`}

	for name, data := range refused {
		if err := os.WriteFile(at(name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}

		if _, _, err := runCLI(t, time.Now(), "certificate", "inspect", at(name)); err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("inspect %s: err = %v, want %q", name, err, want[name])
		}
	}
}
