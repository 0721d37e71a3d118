package ca_test

import (
	"os"
	"os/exec"
	"testing"

	cflog "github.com/cloudflare/cfssl/log"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
)

// TestImportLeavesCfsslLogLevel: neither importing ca nor building and
// using an issuer changes cfssl's log level, a global of that library: the
// issuer reads cfssl's signing profiles but signs without cfssl's signer,
// which is what logged. The check runs in a fresh test process.
func TestImportLeavesCfsslLogLevel(t *testing.T) {
	if os.Getenv("AEGIS_CFSSL_LEVEL_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestImportLeavesCfsslLogLevel$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AEGIS_CFSSL_LEVEL_CHILD=1")

		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}

		return
	}

	if cflog.Level != cflog.LevelInfo {
		t.Fatalf("cfssl log level %d before any issuer, want its default %d", cflog.Level, cflog.LevelInfo)
	}

	iss := catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, testutil.Epoch), testutil.Epoch)
	catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileServer, 0)

	if cflog.Level != cflog.LevelInfo {
		t.Fatalf("cfssl log level %d after issuing, want its default %d", cflog.Level, cflog.LevelInfo)
	}
}
