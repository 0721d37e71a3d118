// Package resourcetypes defines Aegis's own COSI resource types: what a
// node has that no Talos type describes (its certificates, its time
// servers, the config it booted with, its installed versions). The node's
// resource API serves them and clients decode them, so the package imports
// only COSI's runtime.
package resourcetypes

import (
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/resource/typed"
)

// NamespaceName is the namespace of Aegis's own resource types: what a
// node has that no Talos type describes.
const NamespaceName resource.Namespace = "aegis"

// The Aegis resource types.
const (
	CertificateStatusType = resource.Type("CertificateStatuses.aegis.dev")
	NTPStatusType         = resource.Type("NTPStatuses.aegis.dev")
	MachineConfigType     = resource.Type("MachineConfigs.aegis.dev")
)

// Singleton IDs.
const (
	// NTPStatusID is the ID of the node's one NTP status.
	NTPStatusID = resource.ID("node")
	// MachineConfigID is the ID of the config the node booted with, as
	// Talos names its own.
	MachineConfigID = resource.ID("v1alpha1")
)

// Kinds of certificate a CertificateStatus describes.
const (
	CertKindServer       = "server"       // the node's server certificate (apid, trustd)
	CertKindImpersonator = "impersonator" // apid's certificate for forwarding to other nodes
	CertKindOSCA         = "os-ca"        // the OS CA this node signs with (control planes)
	CertKindAcceptedCA   = "accepted-ca"  // a CA the node accepts client and node certificates from
	CertKindEtcdCA       = "etcd-ca"      // the etcd CA (control planes)
	CertKindEtcd         = "etcd"         // etcd's server, peer and client certificates (control planes)
	// CertKindEtcdTrustedCA is an etcd CA the running etcd member loaded at
	// its start and trusts for peers and clients (control planes).
	CertKindEtcdTrustedCA = "etcd-trusted-ca"
)

// CertificateStatus describes one certificate of the node: never its key.
type CertificateStatus = typed.Resource[CertificateStatusSpec, CertificateStatusExtension]

// CertificateStatusSpec is what an operator checks of a certificate.
type CertificateStatusSpec struct {
	Kind    string `yaml:"kind" protobuf:"1"`
	Subject string `yaml:"subject" protobuf:"2"`
	Issuer  string `yaml:"issuer" protobuf:"3"`
	// Fingerprint is the SHA-256 of the certificate, hex.
	Fingerprint string `yaml:"fingerprint" protobuf:"4"`
	// IssuerFingerprint is the SHA-256 of the accepted CA that signed it,
	// empty if none of the node's accepted CAs did.
	IssuerFingerprint string    `yaml:"issuerFingerprint" protobuf:"5"`
	NotBefore         time.Time `yaml:"notBefore" protobuf:"6"`
	NotAfter          time.Time `yaml:"notAfter" protobuf:"7"`
	DNSNames          []string  `yaml:"dnsNames,omitempty" protobuf:"8"`
	IPAddresses       []string  `yaml:"ipAddresses,omitempty" protobuf:"9"`
	IsCA              bool      `yaml:"isCA" protobuf:"10"`
	// Roles are the certificate's Organization values (os:impersonator).
	Roles []string `yaml:"roles,omitempty" protobuf:"11"`
}

// DeepCopy implements typed.DeepCopyable.
func (s CertificateStatusSpec) DeepCopy() CertificateStatusSpec {
	s.DNSNames, s.IPAddresses, s.Roles = slices.Clone(s.DNSNames), slices.Clone(s.IPAddresses), slices.Clone(s.Roles)

	return s
}

// NewCertificateStatus returns an empty CertificateStatus with id.
func NewCertificateStatus(id resource.ID) *CertificateStatus {
	return typed.NewResource[CertificateStatusSpec, CertificateStatusExtension](
		resource.NewMetadata(NamespaceName, CertificateStatusType, id, resource.VersionUndefined), CertificateStatusSpec{})
}

// CertificateStatusExtension gives the type its definition.
type CertificateStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (CertificateStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type: CertificateStatusType, Aliases: []resource.Type{"certs", "certificate"}, DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Kind", JSONPath: "{.kind}"},
			{Name: "Subject", JSONPath: "{.subject}"},
			{Name: "Not After", JSONPath: "{.notAfter}"},
		},
	}
}

// NTPStatus is the node's view of its time servers: the Talos TimeStatus
// says whether the clock is synced, this says against what and by how much.
type NTPStatus = typed.Resource[NTPStatusSpec, NTPStatusExtension]

// NTPStatusSpec is the time service's last measurement.
type NTPStatusSpec struct {
	Synced bool `yaml:"synced" protobuf:"1"`
	// TrustHostClock: the config trusts the host clock; nothing is measured.
	TrustHostClock bool `yaml:"trustHostClock" protobuf:"2"`
	// Server answered the last valid reply; Offset and RTT are from it.
	Server  string        `yaml:"server" protobuf:"3"`
	Offset  time.Duration `yaml:"offset" protobuf:"4"`
	RTT     time.Duration `yaml:"rtt" protobuf:"5"`
	Checked time.Time     `yaml:"checked" protobuf:"6"`
	// Error is why the last round found no valid reply.
	Error   string   `yaml:"error,omitempty" protobuf:"7"`
	Servers []string `yaml:"servers,omitempty" protobuf:"8"`
}

// DeepCopy implements typed.DeepCopyable.
func (s NTPStatusSpec) DeepCopy() NTPStatusSpec {
	s.Servers = slices.Clone(s.Servers)

	return s
}

// NewNTPStatus returns an empty NTPStatus.
func NewNTPStatus() *NTPStatus {
	return typed.NewResource[NTPStatusSpec, NTPStatusExtension](
		resource.NewMetadata(NamespaceName, NTPStatusType, NTPStatusID, resource.VersionUndefined), NTPStatusSpec{})
}

// NTPStatusExtension gives the type its definition.
type NTPStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (NTPStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type: NTPStatusType, Aliases: []resource.Type{"ntp"}, DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Synced", JSONPath: "{.synced}"},
			{Name: "Server", JSONPath: "{.server}"},
			{Name: "Offset", JSONPath: "{.offset}"},
		},
	}
}

// MachineConfig is the config the node booted with, its secrets redacted.
// It is Aegis's own type: an Aegis config is not a Talos config, and a
// Talos client decoding Talos's MachineConfig type would refuse it.
type MachineConfig = typed.Resource[MachineConfigSpec, MachineConfigExtension]

// MachineConfigSpec holds the redacted config.
type MachineConfigSpec struct {
	// Document is the config as YAML, with every secret replaced by
	// Redacted.
	Document string `yaml:"document" protobuf:"1"`
	// Redacted lists the paths whose values were replaced.
	Redacted []string `yaml:"redacted" protobuf:"2"`
}

// DeepCopy implements typed.DeepCopyable.
func (s MachineConfigSpec) DeepCopy() MachineConfigSpec {
	s.Redacted = slices.Clone(s.Redacted)

	return s
}

// NewMachineConfig returns an empty MachineConfig.
func NewMachineConfig() *MachineConfig {
	return typed.NewResource[MachineConfigSpec, MachineConfigExtension](
		resource.NewMetadata(NamespaceName, MachineConfigType, MachineConfigID, resource.VersionUndefined), MachineConfigSpec{})
}

// MachineConfigExtension gives the type its definition.
type MachineConfigExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider. The
// automatic aliases (machineconfig, mc) are Talos's MachineConfigs type's,
// which the node serves too: this one is named aegisconfig.
func (MachineConfigExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type: MachineConfigType, Aliases: []resource.Type{"aegisconfig", "aegisconfigs"}, DefaultNamespace: NamespaceName,
		SkipAutomaticAliases: true,
	}
}

// The types register with the protobuf registry so that clients of this
// module (aegisctl, tests) decode them into their typed form; other
// clients decode them as generic resources with a YAML spec.
func init() {
	for _, err := range []error{
		protobuf.RegisterDynamic[CertificateStatusSpec](CertificateStatusType, &CertificateStatus{}),
		protobuf.RegisterDynamic[NTPStatusSpec](NTPStatusType, &NTPStatus{}),
		protobuf.RegisterDynamic[MachineConfigSpec](MachineConfigType, &MachineConfig{}),
		protobuf.RegisterDynamic[UpgradeStatusSpec](UpgradeStatusType, &UpgradeStatus{}),
	} {
		if err != nil {
			panic(err)
		}
	}
}
