package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestIssuanceRecordsSurviveRefusals: 40,000 refused calls from many
// sources leave every issuance record in audit.log, and are all accounted
// for in refusals.log in a bounded number of lines.
func TestIssuanceRecordsSurviveRefusals(t *testing.T) {
	const sources, perSource = 64, 640 // 40,960 refusals

	if testing.Short() {
		t.Skip("40,000 calls")
	}

	state := t.TempDir()

	logs, err := openAuditLogs(state, opsLog{})
	if err != nil {
		t.Fatal(err)
	}

	env := trustdtest.Start(t, trustdtest.Options{
		GateOpen: true, Audit: logs.audit, Refusals: logs.refusals, RateLimit: trustd.RateLimit{Burst: trustd.DefaultFailureBurst},
	})
	ctx := t.Context()
	csr := trustdtest.CSR(t, ca.Ed25519, "node-1", "node-1")

	var serials []string

	for i := range 3 {
		// The static token obtains the caller's own address only.
		src := fmt.Sprintf("127.0.3.%d", i+1)

		resp, err := trustdtest.Call(ctx, env.Client(t, src), trustdtest.StaticToken, trustdtest.CSR(t, ca.Ed25519, src, src))
		if err != nil {
			t.Fatal(err)
		}

		cert, err := ca.ParseCertificate(resp.GetCrt())
		if err != nil {
			t.Fatal(err)
		}

		serials = append(serials, fmt.Sprintf("%x", cert.SerialNumber))
	}

	var wg sync.WaitGroup

	for i := range sources {
		c := env.Client(t, fmt.Sprintf("127.0.4.%d", i+1))

		wg.Go(func() {
			for range perSource {
				if _, err := trustdtest.Call(ctx, c, "zzzzzz.0123456789abcdef", csr); status.Code(err) == codes.OK {
					t.Error("a bad token obtained a certificate")
				}
			}
		})
	}

	wg.Wait()
	env.Stop()

	if err := logs.close(); err != nil {
		t.Fatal(err)
	}

	issued := readRecords(t, filepath.Join(state, "trustd", auditFile))
	if len(issued) != len(serials) {
		t.Fatalf("%d records in %s, want the %d issuances", len(issued), auditFile, len(serials))
	}

	for i, r := range issued {
		if r["decision"] != trustd.DecisionIssued || r["serial"] != serials[i] || r["log"] != "audit" {
			t.Fatalf("issuance record %d: %v, want serial %s", i, r, serials[i])
		}
	}

	refused := readRecords(t, filepath.Join(state, "trustd", refusalsFile))
	full, counted := 0, 0

	for _, r := range refused {
		if r["msg"] == trustd.MsgRefusals {
			n, _ := r[trustd.AuditCount].(float64)
			counted += int(n)
		} else {
			full++
		}
	}

	if full != sources || full+counted != sources*perSource {
		t.Fatalf("%s: %d refusals in full and %d counted, want %d and %d in all", refusalsFile, full, counted, sources, sources*perSource)
	}

	if len(refused) > 2*sources {
		t.Fatalf("%d lines for the refusals of %d sources", len(refused), sources)
	}

	for _, f := range []string{auditFile, refusalsFile} {
		b, _ := os.ReadFile(filepath.Join(state, "trustd", f))
		if strings.Contains(string(b), "0123456789abcdef") {
			t.Fatalf("%s holds a token secret", f)
		}
	}
}

func readRecords(t *testing.T, path string) []map[string]any {
	t.Helper()

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var out []map[string]any

	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}

		out = append(out, r)
	}

	return out
}
