package certs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

// etcdRotation is a control plane's config and the configs of the three
// steps of an etcd CA rotation from its CA to a new one.
type etcdRotation struct {
	base, accept, issue, drop *certs.MachineConfig
	oldCA, newCA              *ca.CA
}

func newEtcdRotation(t *testing.T) etcdRotation {
	t.Helper()

	base := parseCP(t, func(*certs.MachineConfig) {})
	oldCA := base.EtcdCA()
	newCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	oldPair, newPair := *base.Cluster.Etcd.CA, certs.CertAndKey{Crt: newCA.CertPEM, Key: newCA.KeyPEM}

	return etcdRotation{
		base:   base,
		accept: parseCP(t, func(c *certs.MachineConfig) { c.Cluster.Etcd.AcceptedCAs = []certs.CertAndKey{{Crt: newCA.CertPEM}} }),
		issue: parseCP(t, func(c *certs.MachineConfig) {
			c.Cluster.Etcd.CA = &newPair
			c.Cluster.Etcd.AcceptedCAs = []certs.CertAndKey{{Crt: oldPair.Crt}}
		}),
		drop:  parseCP(t, func(c *certs.MachineConfig) { c.Cluster.Etcd.CA = &newPair }),
		oldCA: oldCA, newCA: newCA,
	}
}

// parseCP is the golden control plane's config, edited and validated.
func parseCP(t *testing.T, edit func(*certs.MachineConfig)) *certs.MachineConfig {
	t.Helper()

	c, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	edit(c)

	if err := c.Validate("cp.yaml", testutil.Epoch); err != nil {
		t.Fatal(err)
	}

	return c
}

func TestEtcdAcceptedCAsValidation(t *testing.T) {
	newCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	cp := parseCP(t, func(*certs.MachineConfig) {})

	for name, tc := range map[string]struct {
		worker   bool
		accepted []certs.CertAndKey
		want     []string
	}{
		"with its key": {accepted: []certs.CertAndKey{{Crt: newCA.CertPEM, Key: newCA.KeyPEM}},
			want: []string{"cluster.etcd.acceptedCAs[0].key: accepted etcd CAs are certificates only"}},
		"twice": {accepted: []certs.CertAndKey{{Crt: newCA.CertPEM}, {Crt: newCA.CertPEM}},
			want: []string{"cluster.etcd.acceptedCAs[1].crt: listed twice"}},
		"the etcd CA itself": {accepted: []certs.CertAndKey{{Crt: cp.Cluster.Etcd.CA.Crt}},
			want: []string{"cluster.etcd.acceptedCAs[0].crt: is cluster.etcd.ca itself"}},
		"not a certificate": {accepted: []certs.CertAndKey{{Crt: []byte("junk")}},
			want: []string{"cluster.etcd.acceptedCAs[0].crt: "}},
		"on a worker": {worker: true, accepted: []certs.CertAndKey{{Crt: newCA.CertPEM}},
			want: []string{"cluster.etcd.acceptedCAs: must be empty on workers"}},
	} {
		t.Run(name, func(t *testing.T) {
			path := goldenControlPlane
			if tc.worker {
				path = goldenWorker
			}

			c, err := certs.ParseMachineConfig(path, []byte(readGolden(t, path)), testutil.Epoch)
			if err != nil {
				t.Fatal(err)
			}

			c.Cluster.Etcd.AcceptedCAs = tc.accepted

			err = c.Validate("cp.yaml", testutil.Epoch)

			var verr *certs.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("accepted: %v", err)
			}

			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestEtcdTrustedCAs(t *testing.T) {
	r := newEtcdRotation(t)

	for name, tc := range map[string]struct {
		cfg  *certs.MachineConfig
		want []*ca.CA
	}{
		"base":   {r.base, []*ca.CA{r.oldCA}},
		"accept": {r.accept, []*ca.CA{r.oldCA, r.newCA}},
		"issue":  {r.issue, []*ca.CA{r.newCA, r.oldCA}},
		"drop":   {r.drop, []*ca.CA{r.newCA}},
	} {
		got := tc.cfg.EtcdTrustedCAs()
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d trusted CAs, want %d", name, len(got), len(tc.want))
		}

		for i, w := range tc.want {
			if !got[i].Equal(w.Cert) {
				t.Errorf("%s: trusted CA %d is not the expected one", name, i)
			}
		}
	}
}

func TestCheckEtcdCAChange(t *testing.T) {
	r := newEtcdRotation(t)

	for name, tc := range map[string]struct {
		old, updated *certs.MachineConfig
		want         string
	}{
		"no change":           {r.base, r.base, ""},
		"step 1":              {r.base, r.accept, ""},
		"step 2":              {r.accept, r.issue, ""},
		"step 3":              {r.issue, r.drop, ""},
		"outright swap":       {r.base, r.drop, "cluster.etcd.ca: the new etcd CA is not trusted yet"},
		"swap without accept": {r.base, r.issue, "cluster.etcd.ca: the new etcd CA is not trusted yet"},
		"issue and drop":      {r.accept, r.drop, "cluster.etcd.ca: the previous etcd CA must stay"},
		"back to the old one": {r.issue, r.accept, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := certs.CheckEtcdCAChange(tc.old, tc.updated)

			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEtcdPKIChanges(t *testing.T) {
	r := newEtcdRotation(t)

	for name, tc := range map[string]struct {
		old, updated *certs.MachineConfig
		want         certs.EtcdPKIChange
	}{
		"none":                     {r.base, r.base, certs.EtcdPKIChange{}},
		"step 1 restarts":          {r.base, r.accept, certs.EtcdPKIChange{Trust: true}},
		"step 2 re-issues only":    {r.accept, r.issue, certs.EtcdPKIChange{Issuer: true}},
		"step 3 restarts":          {r.issue, r.drop, certs.EtcdPKIChange{Trust: true}},
		"rollback of step 2":       {r.issue, r.accept, certs.EtcdPKIChange{Issuer: true}},
		"rollback of step 1":       {r.accept, r.base, certs.EtcdPKIChange{Trust: true}},
		"no etcd CA change at all": {r.drop, r.drop, certs.EtcdPKIChange{}},
	} {
		if got := certs.EtcdPKIChanges(tc.old, tc.updated); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestEtcdAcceptedCAsChangeLive(t *testing.T) {
	r := newEtcdRotation(t)

	fields, err := certs.ChangedFields(r.base, r.accept)
	if err != nil {
		t.Fatal(err)
	}

	if len(fields) != 1 || fields[0] != "cluster.etcd.acceptedCAs" || certs.ClassOf(fields[0]) != certs.ChangeLive {
		t.Fatalf("changed %v, want cluster.etcd.acceptedCAs, live", fields)
	}

	if !certs.IsEtcdCAField("cluster.etcd.ca.crt") || certs.IsEtcdCAField("cluster.etcd.acceptedCAs") {
		t.Error("IsEtcdCAField tells the wrong fields")
	}
}

func TestRedactedDuringEtcdRotation(t *testing.T) {
	r := newEtcdRotation(t)

	out, err := r.issue.Redacted()
	if err != nil {
		t.Fatal(err)
	}

	if strings.Contains(string(out), b64(r.newCA.KeyPEM)) || strings.Contains(string(out), b64(r.oldCA.KeyPEM)) {
		t.Error("the redacted config holds an etcd CA key")
	}

	for _, crt := range [][]byte{r.newCA.CertPEM, r.oldCA.CertPEM} {
		if !strings.Contains(string(out), b64(crt)) {
			t.Error("the redacted config lost an etcd CA certificate")
		}
	}
}
