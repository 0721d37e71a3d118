package certs_test

import (
	"encoding/base64"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestMachineConfigProblems(t *testing.T) {
	cp := readGolden(t, goldenControlPlane)
	worker := readGolden(t, goldenWorker)
	otherCA := catest.NewCA(t, ca.Ed25519, testutil.Epoch)

	tests := []struct {
		name  string
		base  string
		edit  func(s string) string
		paths []string
	}{
		{name: "unknown fields, all of them", base: cp, edit: func(s string) string {
			return strings.Replace(s, "machine:\n", "machine:\n    colour: blue\n    time2: {}\n", 1) + "extra: 1\n"
		}, paths: []string{"machine.colour", "machine.time2", "extra"}},
		{name: "unknown nested field", base: cp, edit: func(s string) string {
			return strings.Replace(s, "    time:\n", "    time:\n        drift: 3\n", 1)
		}, paths: []string{"machine.time.drift"}},
		{name: "bad version and type", base: cp, edit: func(s string) string {
			s = strings.Replace(s, "version: v1alpha1", "version: v2", 1)

			return strings.Replace(s, "type: controlplane", "type: master", 1)
		}, paths: []string{"version", "machine.type"}},
		{name: "bad token and SAN", base: cp, edit: func(s string) string {
			s = replaceLine(s, "    token: ", "    token: not-a-token")

			return strings.Replace(s, "- demo.example", "- '*.example.com'", 1)
		}, paths: []string{"machine.token", "machine.certSANs[0]"}},
		{name: "bad worker SAN pattern", base: cp, edit: func(s string) string {
			return strings.Replace(s, "cluster:\n", "cluster:\n    workerSANs:\n        - '*'\n", 1)
		}, paths: []string{"cluster.workerSANs"}},
		{name: "control plane without CA key", base: cp, edit: func(s string) string {
			return removeLine(s, "        key: ")
		}, paths: []string{"machine.ca.key"}},
		{name: "worker with CA key", base: worker, edit: func(s string) string {
			return strings.Replace(s, "        crt: ", "        key: "+b64(otherCA.KeyPEM)+"\n        crt: ", 1)
		}, paths: []string{"machine.ca.key"}},
		{name: "control plane key of another CA", base: cp, edit: func(s string) string {
			return replaceLine(s, "        key: ", "        key: "+b64(otherCA.KeyPEM))
		}, paths: []string{"machine.ca.key"}},
		{name: "CA certificate not base64", base: cp, edit: func(s string) string {
			return replaceLine(s, "        crt: ", "        crt: '%%%'")
		}, paths: []string{"machine.ca.crt"}},
		{name: "no time source and bad listen address", base: cp, edit: func(s string) string {
			s = strings.Replace(s, "            - 127.0.0.1:10123\n", "", 1)
			s = strings.Replace(s, "        servers:\n", "", 1)
			s = strings.Replace(s, "    time:\n", "    time: {}\n", 1)

			return strings.Replace(s, "    type: controlplane\n", "    type: controlplane\n    listenAddress: 127.5.0.300\n", 1)
		}, paths: []string{"machine.listenAddress", "machine.time"}},
		{name: "unknown runtime", base: cp, edit: func(s string) string {
			return strings.Replace(s, "    type: controlplane\n", "    type: controlplane\n    runtime: docker\n", 1)
		}, paths: []string{"machine.runtime"}},
		{name: "both time sources, bad server, offset too big", base: cp, edit: func(s string) string {
			s = strings.Replace(s, "            - 127.0.0.1:10123\n", "            - 127.0.0.1:99999\n        trustHostClock: true\n        maxOffset: 1h\n", 1)

			return s
		}, paths: []string{"machine.time", "machine.time.servers[0]", "machine.time.maxOffset"}},
		{name: "poll interval too short", base: cp, edit: func(s string) string {
			return strings.Replace(s, "            - 127.0.0.1:10123\n", "            - 127.0.0.1:10123\n        pollInterval: 100ms\n", 1)
		}, paths: []string{"machine.time.pollInterval"}},
		{name: "poll interval too long", base: cp, edit: func(s string) string {
			return strings.Replace(s, "            - 127.0.0.1:10123\n", "            - 127.0.0.1:10123\n        pollInterval: 2h\n", 1)
		}, paths: []string{"machine.time.pollInterval"}},
		{name: "worker without endpoints, bad cluster name", base: worker, edit: func(s string) string {
			s = strings.Replace(s, "    controlPlane:\n        endpoints:\n            - 127.5.0.2\n", "    controlPlane: {}\n", 1)

			return strings.Replace(s, "name: demo", "name: Demo.Cluster", 1)
		}, paths: []string{"cluster.name", "cluster.controlPlane.endpoints"}},
		{name: "control plane without the etcd CA", base: cp, edit: func(s string) string {
			s, _, _ = strings.Cut(s, "    etcd:\n")

			return s
		}, paths: []string{"cluster.etcd.ca"}},
		{name: "etcd CA key of another CA", base: cp, edit: func(s string) string {
			return replaceLine(s, "            key: ", "            key: "+b64(otherCA.KeyPEM))
		}, paths: []string{"cluster.etcd.ca.key"}},
		{name: "worker with the etcd CA", base: worker, edit: func(s string) string {
			return s + "    etcd:\n        ca:\n            crt: " + b64(otherCA.CertPEM) + "\n            key: " + b64(otherCA.KeyPEM) + "\n"
		}, paths: []string{"cluster.etcd.ca"}},
		{name: "accepted CA with key, accepted leaf", base: cp, edit: func(s string) string {
			leaf := catest.Issue(t, catest.NewIssuer(t, otherCA, testutil.Epoch), catest.Key(t, ca.Ed25519), ca.ProfileServer, 0)

			return strings.Replace(s, "    certSANs:\n", "    acceptedCAs:\n        - crt: "+b64(otherCA.CertPEM)+"\n          key: "+b64(otherCA.KeyPEM)+"\n        - crt: "+b64(leaf.PEM)+"\n    certSANs:\n", 1)
		}, paths: []string{"machine.acceptedCAs[0].key", "machine.acceptedCAs[1].crt"}},
		{name: "metrics ports: out of range, taken, set while off", base: cp, edit: func(s string) string {
			return strings.Replace(s, "    time:\n", "    metrics:\n        machinedPort: 70000\n        apidPort: 50001\n        trustdPort: 9200\n    time:\n", 1)
		}, paths: []string{"machine.metrics.machinedPort", "machine.metrics.apidPort", "machine.metrics.apidPort", "machine.metrics.trustdPort"}},
		{name: "metrics ports clash", base: cp, edit: func(s string) string {
			return strings.Replace(s, "    time:\n", "    metrics:\n        enabled: true\n        trustdPort: 9101\n    time:\n", 1)
		}, paths: []string{"machine.metrics.trustdPort"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certs.ParseMachineConfig("test.yaml", []byte(tt.edit(tt.base)), testutil.Epoch)

			var verr *certs.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("err = %v, want *certs.ValidationError", err)
			}

			var got []string
			for _, p := range verr.Problems {
				got = append(got, p.Path)
			}

			if !slices.Equal(got, tt.paths) {
				t.Fatalf("problem paths = %q, want %q\n%v", got, tt.paths, err)
			}
		})
	}
}

func TestMachineConfigExpiredCA(t *testing.T) {
	_, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch.Add(11*365*24*time.Hour))
	if err == nil || !strings.Contains(err.Error(), "machine.ca.crt: certificate expired") {
		t.Fatalf("err = %v, want machine.ca.crt expired", err)
	}
}

func TestMachineConfigRefusesOddDocuments(t *testing.T) {
	cp := readGolden(t, goldenControlPlane)

	for name, doc := range map[string]string{
		"empty":          "",
		"two documents":  cp + "---\n" + cp,
		"alias":          "version: &v v1alpha1\nmachine:\n    hostname: *v\n",
		"not a mapping":  "- 1\n- 2\n",
		"wrong type":     strings.Replace(cp, "    certSANs:\n        - demo.example\n", "    certSANs: demo.example\n", 1),
		"oversized":      cp + "#" + strings.Repeat("x", certs.MaxDocumentSize),
		"duplicate keys": cp + "version: v1alpha1\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := certs.ParseMachineConfig(name, []byte(doc), testutil.Epoch); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestLoadMachineConfigWithErrorsWritesNothing(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/bad.yaml"

	if err := os.WriteFile(path, []byte("version: v1alpha1\nmachine: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	_, err := certs.LoadMachineConfig(path, testutil.Epoch)

	var verr *certs.ValidationError
	if !errors.As(err, &verr) || len(verr.Problems) < 4 {
		t.Fatalf("want every problem listed, got %v", err)
	}

	if !strings.HasPrefix(err.Error(), "certs: "+path+": ") {
		t.Fatalf("error does not name the file: %v", err)
	}

	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("loading wrote files: %d entries", len(entries))
	}
}

func TestCheckHostPort(t *testing.T) {
	for in, ok := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:50000": true, "node-1.example": true, "node:1": true,
		"fd00::1": true, "[fd00::1]:50000": true, "": false, "host:0": false, "host:x": false,
		"https://host:6443": false, "bad_host": false, "*.example": false,
	} {
		if err := certs.CheckHostPort(in); (err == nil) != ok {
			t.Errorf("CheckHostPort(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func FuzzParseMachineConfig(f *testing.F) {
	f.Add([]byte(readGolden(f, goldenControlPlane)))
	f.Add([]byte(readGolden(f, goldenWorker)))
	f.Add([]byte("version: v1alpha1\nmachine: {type: worker}\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := certs.ParseMachineConfig("fuzz", data, testutil.Epoch)
		if err != nil {
			var verr *certs.ValidationError
			if !errors.As(err, &verr) || len(verr.Problems) == 0 {
				t.Fatalf("error is not a validation error with problems: %v", err)
			}

			return
		}

		// An accepted config must survive its own round trip.
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}

		if _, err := certs.ParseMachineConfig("again", out, testutil.Epoch); err != nil {
			t.Fatalf("re-encoded config refused: %v", err)
		}
	})
}

func readGolden(tb testing.TB, path string) string {
	tb.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}

	return string(data)
}

func replaceLine(s, prefix, with string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = with

			break
		}
	}

	return strings.Join(lines, "\n")
}

func removeLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return strings.Join(append(lines[:i], lines[i+1:]...), "\n")
		}
	}

	return s
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// TestEtcdDisabled: a control plane may run no etcd, and then carries no CA.
func TestEtcdDisabled(t *testing.T) {
	cp := readGolden(t, goldenControlPlane)
	s, _, _ := strings.Cut(cp, "    etcd:\n")

	c, err := certs.ParseMachineConfig("test.yaml", []byte(s+"    etcd:\n        disabled: true\n"), testutil.Epoch)
	if err != nil || c.EtcdCA() != nil {
		t.Fatalf("disabled etcd: %v, CA %v", err, c.EtcdCA())
	}

	full, err := certs.ParseMachineConfig("test.yaml", []byte(cp), testutil.Epoch)
	if err != nil || full.EtcdCA() == nil {
		t.Fatalf("control plane: %v, want its etcd CA", err)
	}
}

func TestMetricsListen(t *testing.T) {
	cfg, err := certs.ParseMachineConfig("cp.yaml", []byte(readGolden(t, goldenControlPlane)), testutil.Epoch)
	if err != nil {
		t.Fatal(err)
	}

	if got := cfg.MetricsListen("apid"); got != "" {
		t.Fatalf("metrics off: MetricsListen = %q", got)
	}

	cfg.Machine.ListenAddress = "127.0.0.2"
	cfg.Machine.Metrics = certs.MetricsSpec{Enabled: true, TrustdPort: 9300}

	for daemon, want := range map[string]string{"machined": "127.0.0.2:9101", "apid": "127.0.0.2:9102", "trustd": "127.0.0.2:9300"} {
		if got := cfg.MetricsListen(daemon); got != want {
			t.Errorf("MetricsListen(%s) = %q, want %q", daemon, got, want)
		}
	}
}
