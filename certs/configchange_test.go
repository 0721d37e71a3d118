package certs_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestChangedFieldsAndClasses(t *testing.T) {
	base, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	changed := *base
	changed.Machine.Time = certs.TimeSpec{Servers: []string{"127.0.0.1:123"}, MaxOffset: base.Machine.Time.MaxOffset}
	changed.Machine.CertSANs = []string{"extra.example"}
	changed.Cluster.Name = "other"

	fields, err := certs.ChangedFields(base, &changed)
	if err != nil {
		t.Fatal(err)
	}

	want := []string{"cluster.name", "machine.certSANs", "machine.time.servers"}
	if !slices.Equal(fields, want) {
		t.Fatalf("changed %v, want %v", fields, want)
	}

	for path, class := range map[string]certs.ChangeClass{
		"machine.time.servers": certs.ChangeLive, "machine.acceptedCAs": certs.ChangeLive,
		"machine.token": certs.ChangeLive, "cluster.workerSANs": certs.ChangeLive,
		"machine.certSANs": certs.ChangeReboot, "machine.metrics.enabled": certs.ChangeReboot,
		"machine.type": certs.ChangeIdentity, "machine.ca.key": certs.ChangeIdentity,
		"cluster.name": certs.ChangeIdentity, "cluster.etcd.ca.crt": certs.ChangeIdentity,
		"machine.tokenish": certs.ChangeReboot,
	} {
		if got := certs.ClassOf(path); got != class {
			t.Errorf("ClassOf(%s) = %d, want %d", path, got, class)
		}
	}

	if none, _ := certs.ChangedFields(base, base); len(none) != 0 {
		t.Errorf("a config differs from itself: %v", none)
	}
}

func TestRedacted(t *testing.T) {
	cfg, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}

	for _, secret := range []string{cfg.Machine.Token, b64(cfg.Machine.CA.Key)} {
		if strings.Contains(string(out), secret) {
			t.Errorf("redacted config holds a secret")
		}
	}

	if !strings.Contains(string(out), b64(cfg.Machine.CA.Crt)) {
		t.Error("redacted config lost the CA certificate")
	}
}

func TestLineDiff(t *testing.T) {
	a := "a\nb\nc\nd\ne\nf\ng\nh\n"
	b := "a\nb\nc\nD\ne\nf\ng\nh\ni\n"

	got := certs.LineDiff(a, b, 1)
	want := " c\n-d\n+D\n e\n h\n+i\n"

	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}

	if d := certs.LineDiff(a, a, 3); d != "" {
		t.Errorf("equal texts differ: %q", d)
	}
}
