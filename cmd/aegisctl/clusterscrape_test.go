package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/testutil/golden"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// scrapeExample is the scrape example shipped for operators: what `cluster
// show --prometheus` prints for the default three-node cluster.
const scrapeExample = "../../deploy/prometheus/prometheus.yml"

// exampleCluster is a default local cluster of two control planes and a
// worker, with metrics, written to stateDir.
func exampleCluster(t *testing.T, stateDir string, metrics bool) {
	t.Helper()

	c := localcluster.Cluster{Name: localcluster.DefaultName, Dir: filepath.Join(stateDir, localcluster.DefaultName), Metrics: metrics}
	for i, typ := range []certs.NodeType{certs.NodeControlPlane, certs.NodeControlPlane, certs.NodeWorker} {
		name := localcluster.DefaultName + "-controlplane-" + strconv.Itoa(i+1)
		if typ == certs.NodeWorker {
			name = localcluster.DefaultName + "-worker-1"
		}

		c.Nodes = append(c.Nodes, localcluster.Node{Name: name, Type: typ, Address: "127.5.0." + strconv.Itoa(i+2)})
	}

	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}

	if err = os.MkdirAll(c.Dir, 0o700); err != nil {
		t.Fatal(err)
	}

	if err = os.WriteFile(filepath.Join(c.Dir, "cluster.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// `cluster show --prometheus` prints the scrape example for the example
// cluster (-update rewrites the example), and refuses a cluster without
// metrics with the way to get them.
func TestClusterShowPrometheus(t *testing.T) {
	dir := t.TempDir()
	exampleCluster(t, dir, true)

	out := mustRun(t, dir, "cluster", "show", "--prometheus", "--state-dir", dir)

	if golden.Update() {
		if err := os.WriteFile(scrapeExample, []byte(out), 0o644); err != nil { //nolint:gosec // a file of the repository
			t.Fatal(err)
		}
	}

	want, err := os.ReadFile(scrapeExample)
	if err != nil {
		t.Fatal(err)
	}

	if out != string(want) {
		t.Fatalf("%s is not what `cluster show --prometheus` prints (rewrite it with -update):\n%s", scrapeExample, out)
	}

	none := t.TempDir()
	exampleCluster(t, none, false)

	if out, err := run(t, none, "cluster", "show", "--prometheus", "--state-dir", none); err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Fatalf("a cluster without metrics: %v\n%s", err, out)
	}
}

// The scrape example is a Prometheus configuration: no field Prometheus
// would not know, an interval it reads, and for each daemon's job one
// target per node that runs it, on that daemon's metrics port.
func TestScrapeExampleParses(t *testing.T) {
	data, err := os.ReadFile(scrapeExample)
	if err != nil {
		t.Fatal(err)
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)

	var cfg scrapeConfig
	if err = dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", scrapeExample, err)
	}

	if d, err := time.ParseDuration(cfg.Global.ScrapeInterval); err != nil || d <= 0 {
		t.Fatalf("scrape_interval %q: %v", cfg.Global.ScrapeInterval, err)
	}

	if len(cfg.ScrapeConfigs) != len(scrapeDaemons) {
		t.Fatalf("%d jobs, want one per daemon (%d)", len(cfg.ScrapeConfigs), len(scrapeDaemons))
	}

	for i, d := range scrapeDaemons {
		job := cfg.ScrapeConfigs[i]
		nodes := 3 // two control planes and a worker
		if d.controlPlaneOnly {
			nodes = 2
		}

		if job.JobName != scrapeJobName(d.name) || job.MetricsPath != "/metrics" || len(job.StaticConfigs) != nodes {
			t.Fatalf("job %d: %+v", i, job)
		}

		for _, sc := range job.StaticConfigs {
			host, port, err := net.SplitHostPort(sc.Targets[0])
			if err != nil || net.ParseIP(host) == nil || port != strconv.Itoa(d.port) || len(sc.Targets) != 1 {
				t.Fatalf("job %s: target %v: %v", job.JobName, sc.Targets, err)
			}

			if sc.Labels[scrapeLabelNode] == "" || sc.Labels[scrapeLabelNodeType] == "" {
				t.Fatalf("job %s: labels %v", job.JobName, sc.Labels)
			}
		}
	}
}
