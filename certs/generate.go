package certs

import (
	"io"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// ConfigOptions says what goes into generated machine configs besides the bundle.
type ConfigOptions struct {
	// ClusterName names the cluster. Required.
	ClusterName string
	// Endpoint is the control-plane endpoint, host or host:port. Required.
	Endpoint string
	// TimeServers are NTP servers; TrustHostClock replaces them.
	TimeServers    []string
	TrustHostClock bool
	// Hostname and ListenAddress are per-node and usually left empty in
	// templates; local clusters set them.
	Hostname      string
	ListenAddress string
	CertSANs      []string
	// Runtime is the machine.runtime of the configs; empty leaves it out.
	Runtime Runtime
}

// GenerateMachineConfig makes the machine config of a node of type t from the
// bundle and checks it at now. Control planes get the OS CA with its key,
// workers its certificate only.
func GenerateMachineConfig(b *Bundle, t NodeType, opts ConfigOptions, now time.Time) (*MachineConfig, error) {
	c := &MachineConfig{
		Version: MachineConfigVersion,
		Machine: MachineSpec{
			Type:          t,
			Hostname:      opts.Hostname,
			ListenAddress: opts.ListenAddress,
			CertSANs:      opts.CertSANs,
			Time:          TimeSpec{Servers: opts.TimeServers, TrustHostClock: opts.TrustHostClock},
			Runtime:       opts.Runtime,
		},
		Cluster: ClusterSpec{Name: opts.ClusterName, ControlPlane: ControlPlaneSpec{Endpoints: []string{opts.Endpoint}}},
	}

	if b.TrustdInfo != nil {
		c.Machine.Token = b.TrustdInfo.Token
	}

	if b.Certs != nil && b.Certs.OS != nil {
		c.Machine.CA = CertAndKey{Crt: b.Certs.OS.Crt}
		if t.IsControlPlane() {
			c.Machine.CA.Key = b.Certs.OS.Key
		}
	}

	if b.Certs != nil && b.Certs.Etcd != nil && t.IsControlPlane() {
		c.Cluster.Etcd.CA = &CertAndKey{Crt: b.Certs.Etcd.Crt, Key: b.Certs.Etcd.Key}
	}

	if err := c.Validate(string(t)+" config", now); err != nil {
		return nil, err
	}

	return c, nil
}

// ClientCertOptions describes a client certificate to make.
type ClientCertOptions struct {
	// Roles go into the certificate's Organization. Empty means os:admin.
	Roles role.Set
	// CommonName names the holder in audit records; it grants nothing.
	CommonName string
	// TTL of the certificate. Zero means the client profile's default, one year.
	TTL time.Duration
	// Rand is the key's source of randomness. Nil means crypto/rand.
	Rand io.Reader
}

// ClientCertificate is a client key and the certificate issued for it.
type ClientCertificate struct {
	Cert *ca.Issued
	Key  []byte
}

// NewClientCertificate generates a key of the CA's type and issues a client
// certificate for it through iss.
func NewClientCertificate(iss *ca.Issuer, opts ClientCertOptions) (*ClientCertificate, error) {
	roles := opts.Roles
	if len(roles) == 0 {
		roles = role.NewSet(role.Admin)
	}

	// A key like the CA's; a CA of a type Aegis does not generate (an RSA
	// CA brought from elsewhere) gets the default type, which it can sign.
	issued, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{
		CommonName: opts.CommonName, Profile: ca.ProfileClient, Roles: roles, TTL: opts.TTL, Rand: opts.Rand,
	})
	if err != nil {
		return nil, err
	}

	return &ClientCertificate{Cert: issued, Key: keyPEM}, nil
}

// NewClientConfig makes a client config with one context, name, holding the
// CA, the client certificate and the endpoints.
func NewClientConfig(name string, endpoints []string, caPEM []byte, cc *ClientCertificate) *ClientConfig {
	return &ClientConfig{
		Context: name,
		Contexts: map[string]*ClientContext{
			name: {Endpoints: endpoints, CA: caPEM, Crt: cc.Cert.PEM, Key: cc.Key},
		},
	}
}
