package resourceapi

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"

	"github.com/aegis-os/aegis/certs"
)

// An Aegis config is not a Talos config: Talos's loader decodes strictly and
// refuses Aegis's fields (listenAddress, time, runtime, …). Talos clients
// read MachineConfigs.config.talos.dev/v1alpha1 as a Talos v1alpha1
// document, so the node serves there the smallest honest Talos view of its
// config, built with Talos's own types so that Talos's loader reads it:
//
//	version: v1alpha1
//	machine:   type, token, ca (crt, key), acceptedCAs, certSANs, network.hostname
//	cluster:   clusterName, etcd.ca (crt, key), discovery.enabled: false
//
// Each field means there what it means in Aegis's config; nothing else is
// claimed (no install disk, no Kubernetes). Cluster discovery is off: an
// Aegis node runs none of Talos's discovery (its member list is etcd's).
// The secrets go through Talos's own redaction (Config.Redact: the token,
// the CA keys) for every caller, os:admin included: Aegis hands out no key
// or token through resources. The type is sensitive, as in Talos, so only
// os:admin reads it at all (access.go). Aegis's own full config, redacted,
// stays at MachineConfigs.aegis.dev.

// talosView is the Talos v1alpha1 document of cfg, secrets redacted, in
// the bytes a Talos client gets.
func talosView(cfg *certs.MachineConfig) ([]byte, error) {
	discovery := false

	doc := &v1alpha1.Config{
		ConfigVersion: "v1alpha1",
		MachineConfig: &v1alpha1.MachineConfig{
			MachineType:     string(cfg.Machine.Type),
			MachineToken:    cfg.Machine.Token,
			MachineCA:       pair(&cfg.Machine.CA),
			MachineCertSANs: cfg.Machine.CertSANs,
		},
		ClusterConfig: &v1alpha1.ClusterConfig{
			ClusterName:            cfg.Cluster.Name,
			ClusterDiscoveryConfig: &v1alpha1.ClusterDiscoveryConfig{DiscoveryEnabled: &discovery},
		},
	}

	for _, a := range cfg.Machine.AcceptedCAs {
		doc.MachineConfig.MachineAcceptedCAs = append(doc.MachineConfig.MachineAcceptedCAs, &x509.PEMEncodedCertificate{Crt: a.Crt})
	}

	if cfg.Machine.Hostname != "" {
		doc.MachineConfig.MachineNetwork = &v1alpha1.NetworkConfig{NetworkHostname: cfg.Machine.Hostname}
	}

	if cfg.Cluster.Etcd.CA != nil {
		doc.ClusterConfig.EtcdConfig = &v1alpha1.EtcdConfig{RootCA: pair(cfg.Cluster.Etcd.CA)}
	}

	redacted := container.NewV1Alpha1(doc).RedactSecrets(RedactedValue)

	out, err := redacted.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("resourceapi: Talos view of the machine config: %w", err)
	}

	return out, nil
}

func pair(p *certs.CertAndKey) *x509.PEMEncodedCertificateAndKey {
	return &x509.PEMEncodedCertificateAndKey{Crt: p.Crt, Key: p.Key}
}

// setTalosConfig sets MachineConfigs.config.talos.dev/v1alpha1 to doc, read
// back through Talos's loader (what a client does with it; a view it
// refuses is not served), unless it holds doc already.
func (s *State) setTalosConfig(doc []byte) error {
	provider, err := configloader.NewFromBytes(doc)
	if err != nil {
		return fmt.Errorf("resourceapi: Talos view of the machine config does not load: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	ctx := context.Background()
	r := talosconfig.NewMachineConfig(provider)

	cur, err := s.st.Get(ctx, r.Metadata())

	switch {
	case state.IsNotFoundError(err):
		err = s.st.Create(ctx, r, state.WithCreateOwner(Owner))
	case err != nil:
	default:
		if old, ok := cur.(*talosconfig.MachineConfig); ok {
			if b, bErr := old.Container().Bytes(); bErr == nil && bytes.Equal(b, doc) {
				return nil
			}
		}

		r.Metadata().SetVersion(cur.Metadata().Version())
		err = s.st.Update(ctx, r, state.WithUpdateOwner(Owner))
	}

	if err != nil {
		return fmt.Errorf("resourceapi: setting %s: %w", r.Metadata(), err)
	}

	return nil
}
