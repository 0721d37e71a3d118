package certs

import (
	"io/fs"
	"path/filepath"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// File names of a cluster's generated configs, as Talos names them.
const (
	ControlPlaneConfigFile = "controlplane.yaml"
	WorkerConfigFile       = "worker.yaml"
	ClientConfigFile       = "aegisconfig"
	SecretsFile            = "secrets.yaml"
)

// ConfigFileMode is the mode of every generated config file: each holds a
// key or the bootstrap token.
const ConfigFileMode fs.FileMode = 0o600

// ClusterConfigs are the configs of a new cluster, made from one bundle.
type ClusterConfigs struct {
	ControlPlane *MachineConfig
	Worker       *MachineConfig
	// Client holds one context, named after the cluster, with an os:admin
	// certificate.
	Client *ClientConfig
	// Secrets, when set, is written with the configs: the bundle was made
	// for them and exists nowhere else.
	Secrets *Bundle
}

// ConfigFile is one file to write: a name relative to the output folder,
// its content and its mode.
type ConfigFile struct {
	Name string
	Data []byte
	Mode fs.FileMode
}

// GenerateClusterConfigs makes the control-plane and worker configs of the
// cluster opts describes, and an admin client config whose certificate
// lives clientTTL (zero: the client profile's default), all from b at now.
// TrustHostClock replaces opts.TimeServers. Nothing is written.
func GenerateClusterConfigs(b *Bundle, opts ConfigOptions, clientTTL time.Duration, now time.Time) (*ClusterConfigs, error) {
	if opts.TrustHostClock {
		opts.TimeServers = nil
	}

	cp, err := GenerateMachineConfig(b, NodeControlPlane, opts, now)
	if err != nil {
		return nil, err
	}

	worker, err := GenerateMachineConfig(b, NodeWorker, opts, now)
	if err != nil {
		return nil, err
	}

	client, err := AdminClientConfig(b, opts.ClusterName, []string{opts.Endpoint}, clientTTL, now)
	if err != nil {
		return nil, err
	}

	return &ClusterConfigs{ControlPlane: cp, Worker: worker, Client: client}, nil
}

// Files renders the configs, in the order they are best written: the
// control plane's, the worker's, the client config, then the secrets
// bundle if there is one. Each file lives in dir.
func (c *ClusterConfigs) Files(dir string) ([]ConfigFile, error) {
	names := []string{ControlPlaneConfigFile, WorkerConfigFile, ClientConfigFile}
	docs := []interface{ Marshal() ([]byte, error) }{c.ControlPlane, c.Worker, c.Client}

	if c.Secrets != nil {
		names, docs = append(names, SecretsFile), append(docs, c.Secrets)
	}

	files := make([]ConfigFile, 0, len(docs))

	for i, d := range docs {
		data, err := d.Marshal()
		if err != nil {
			return nil, err
		}

		files = append(files, ConfigFile{Name: filepath.Join(dir, names[i]), Data: data, Mode: ConfigFileMode})
	}

	return files, nil
}

// AdminClientConfig issues an os:admin client certificate (common name
// "admin", lifetime ttl, zero for the profile's default) from the bundle's
// OS CA at now, and returns a client config whose one context, name, holds
// it with the OS CA and endpoints.
func AdminClientConfig(b *Bundle, name string, endpoints []string, ttl time.Duration, now time.Time) (*ClientConfig, error) {
	osCA, err := b.OSCA(now)
	if err != nil {
		return nil, err
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: osCA, Clock: fixedClock(now)})
	if err != nil {
		return nil, err
	}

	cc, err := NewClientCertificate(iss, ClientCertOptions{Roles: role.NewSet(role.Admin), TTL: ttl, CommonName: "admin"})
	if err != nil {
		return nil, err
	}

	return NewClientConfig(name, endpoints, osCA.CertPEM, cc), nil
}

// fixedClock is a ca.Clock that always reads the same time, so that every
// document of one generation is made at one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }
