package main

import (
	"bytes"
	"fmt"
	"net"
	"strconv"

	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// scrapeInterval is the scrape config's interval: the series move at the
// pace of renewals, elections and NTP rounds, not seconds.
const scrapeInterval = "30s"

// Labels the scrape config puts on every node's targets.
const (
	scrapeLabelNode     = "node"
	scrapeLabelNodeType = "node_type"
)

// scrapeDaemons are the daemons with a metrics endpoint, the port a local
// cluster gives each (machine.metrics' defaults), and whether only
// control planes run it (trustd).
var scrapeDaemons = []struct {
	name             string
	port             int
	controlPlaneOnly bool
}{
	{"machined", certs.DefaultMachinedMetricsPort, false},
	{"apid", certs.DefaultAPIDMetricsPort, false},
	{"trustd", certs.DefaultTrustdMetricsPort, true},
}

// scrapeConfig is the part of a Prometheus configuration that scrapes a
// cluster: one job per daemon, one target group per node that runs it.
type scrapeConfig struct {
	Global        scrapeGlobal `yaml:"global"`
	ScrapeConfigs []scrapeJob  `yaml:"scrape_configs"`
}

type scrapeGlobal struct {
	ScrapeInterval string `yaml:"scrape_interval"`
}

type scrapeJob struct {
	JobName       string         `yaml:"job_name"`
	MetricsPath   string         `yaml:"metrics_path"`
	StaticConfigs []staticConfig `yaml:"static_configs"`
}

type staticConfig struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels,omitempty"`
}

// scrapeJobName is the job of a daemon's endpoints.
func scrapeJobName(daemon string) string { return "aegis-" + daemon }

// clusterScrapeConfig is the scrape config of a local cluster's nodes, or
// an error when the cluster was created without metrics.
func clusterScrapeConfig(c *localcluster.Cluster) (scrapeConfig, error) {
	if !c.Metrics {
		return scrapeConfig{}, fmt.Errorf("cluster %q serves no metrics: create it with `aegisctl cluster create --metrics` (or `make run METRICS=1`)", c.Name)
	}

	out := scrapeConfig{Global: scrapeGlobal{ScrapeInterval: scrapeInterval}}

	for _, d := range scrapeDaemons {
		job := scrapeJob{JobName: scrapeJobName(d.name), MetricsPath: "/metrics"}

		for _, n := range c.Nodes {
			if d.controlPlaneOnly && !n.Type.IsControlPlane() {
				continue
			}

			job.StaticConfigs = append(job.StaticConfigs, staticConfig{
				Targets: []string{net.JoinHostPort(n.Address, strconv.Itoa(d.port))},
				Labels:  map[string]string{scrapeLabelNode: n.Name, scrapeLabelNodeType: string(n.Type)},
			})
		}

		out.ScrapeConfigs = append(out.ScrapeConfigs, job)
	}

	return out, nil
}

// marshalScrapeConfig writes cfg as Prometheus reads it, with a header
// saying where it came from.
func marshalScrapeConfig(c *localcluster.Cluster, cfg scrapeConfig) ([]byte, error) {
	var body bytes.Buffer

	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)

	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("scrape config: %w", err)
	}

	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("scrape config: %w", err)
	}

	head := fmt.Sprintf("# Prometheus scrape config of Aegis cluster %q (aegisctl cluster show --prometheus).\n"+
		"# Grafana dashboard: deploy/grafana/aegis.json; metrics: docs/guide/metrics.md.\n", c.Name)

	return append([]byte(head), body.Bytes()...), nil
}

// writeScrapeConfig prints the scrape config of c.
func writeScrapeConfig(e *env, c *localcluster.Cluster) error {
	cfg, err := clusterScrapeConfig(c)
	if err != nil {
		return err
	}

	out, err := marshalScrapeConfig(c, cfg)
	if err != nil {
		return err
	}

	_, err = e.stdout.Write(out)

	return err
}
