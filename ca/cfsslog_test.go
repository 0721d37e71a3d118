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

// TestImportLeavesCfsslLogLevel: importing ca changes no library's global
// state; cfssl's log level is lowered when the first issuer is built. The
// check runs in a fresh test process, where no other test built an issuer.
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

	catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, testutil.Epoch), testutil.Epoch)

	if cflog.Level != cflog.LevelError {
		t.Fatalf("cfssl log level %d after building an issuer, want %d", cflog.Level, cflog.LevelError)
	}
}
