package node

import (
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
)

// TestAcceptedForSettlesConfigAndReply: on a worker, a live change of the
// accepted CAs and trustd's last reply follow one rule. The config
// decides: a CA it drops is not brought back by the reply; what the reply
// added under a CA the config keeps stays until the next renewal.
func TestAcceptedForSettlesConfigAndReply(t *testing.T) {
	now := time.Now()
	a, b := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)
	underA := crossSign(t, catest.NewCA(t, ca.Ed25519, now), a)

	reply, err := ca.NewAcceptedSet(now, a.Cert, underA)
	if err != nil {
		t.Fatal(err)
	}

	c := &certController{lastReply: reply}

	config := func(own *ca.CA, accepted ...*ca.CA) *certs.MachineConfig {
		cfg := &certs.MachineConfig{
			Version: certs.MachineConfigVersion,
			Machine: certs.MachineSpec{
				Type: certs.NodeWorker, Token: "abcdef.0123456789abcdef", CA: certs.CertAndKey{Crt: own.CertPEM},
				Time: certs.TimeSpec{TrustHostClock: true},
			},
			Cluster: certs.ClusterSpec{Name: "test", ControlPlane: certs.ControlPlaneSpec{Endpoints: []string{"127.0.0.2"}}},
		}
		for _, x := range accepted {
			cfg.Machine.AcceptedCAs = append(cfg.Machine.AcceptedCAs, certs.CertAndKey{Crt: x.CertPEM})
		}

		if err := cfg.Validate("test", now); err != nil {
			t.Fatal(err)
		}

		return cfg
	}

	subjects := func(pemBytes []byte) []string {
		set, err := ca.ParseAcceptedSet(pemBytes, now)
		if err != nil {
			t.Fatal(err)
		}

		var out []string
		for _, x := range set.Certificates() {
			out = append(out, ca.Fingerprint(x))
		}

		return out
	}

	// Step 1 of a rotation: B accepted beside A; the reply's CA under A stays.
	got := subjects(c.acceptedFor(config(a, b)))
	want := []string{ca.Fingerprint(a.Cert), ca.Fingerprint(b.Cert), ca.Fingerprint(underA)}

	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("config {A, B} with the reply: %v, want %v", got, want)
	}

	// Step 3: A dropped. The reply still lists A (the control planes have
	// not dropped it yet): it does not come back, nor does what A signed.
	if got := subjects(c.acceptedFor(config(b))); len(got) != 1 || got[0] != ca.Fingerprint(b.Cert) {
		t.Fatalf("config {B} with a reply listing A: %v, want B alone", got)
	}
}
