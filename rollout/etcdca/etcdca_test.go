package etcdca

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestEditWalksTheSteps(t *testing.T) {
	data, err := os.ReadFile("../../certs/testdata/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := certs.ParseMachineConfig("cp.yaml", data, testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	old := cfg.EtcdCA()
	r := &Rotation{Old: old.Cert, New: catest.NewCA(t, ca.ECDSAP256, testutil.Epoch)}
	prev := cfg

	for _, step := range []Step{Accept, Issue, Drop} {
		// Twice: a step applied again (a resumed rotation) changes nothing.
		for range 2 {
			if err := r.Edit(cfg, step); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
		}

		out, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		next, err := certs.ParseMachineConfig(step.String(), out, testutil.Epoch)
		if err != nil {
			t.Fatalf("%s: the edited config is invalid: %v", step, err)
		}

		if err := certs.CheckEtcdCAChange(prev, next); err != nil {
			t.Fatalf("%s: a node would refuse it: %v", step, err)
		}

		prev, cfg = next, next
	}

	if trusted := cfg.EtcdTrustedCAs(); len(trusted) != 1 || !trusted[0].Equal(r.New.Cert) {
		t.Fatalf("after the rotation %d CAs are trusted, want the new one alone", len(trusted))
	}
}

func TestCheck(t *testing.T) {
	const old, updated = "0ld", "new"

	certsFrom := func(fp string) map[string]string {
		return map[string]string{"etcd-server": fp, "etcd-peer": fp, "etcd-client": fp}
	}

	for name, tc := range map[string]struct {
		step    Step
		trusted []string
		issuers map[string]string
		want    string
	}{
		"accepted":                 {Accept, []string{updated, old}, certsFrom(old), ""},
		"accept, not restarted":    {Accept, []string{old}, certsFrom(old), "trusts 1 CA"},
		"accept, etcd not running": {Accept, nil, certsFrom(old), "trusts 0 CA"},
		"issued":                   {Issue, []string{old, updated}, certsFrom(updated), ""},
		"issue, one certificate left": {Issue, []string{old, updated},
			map[string]string{"etcd-server": updated, "etcd-peer": old, "etcd-client": updated}, "etcd-peer is issued by 0ld"},
		"dropped":                 {Drop, []string{updated}, certsFrom(updated), ""},
		"drop, still trusts both": {Drop, []string{old, updated}, certsFrom(updated), "trusts 2 CA"},
		"no certificates":         {Drop, []string{updated}, nil, "no etcd certificates"},
	} {
		t.Run(name, func(t *testing.T) {
			err := check(tc.step, old, updated, slices.Clone(tc.trusted), tc.issuers)

			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
