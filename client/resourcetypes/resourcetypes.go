// Package resourcetypes defines Aegis's own resource types (namespace
// "aegis"): what a node serves through the resource API that no Talos type
// describes. Servers fill them and clients read them, so the package
// imports only COSI's runtime, never a server package.
package resourcetypes

import (
	"github.com/cosi-project/runtime/pkg/resource"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

// The Aegis resource types live in client/resourcetypes, which clients
// use without linking the server; these are their names here.
const (
	NamespaceName = resourcetypes.NamespaceName

	CertificateStatusType = resourcetypes.CertificateStatusType
	NTPStatusType         = resourcetypes.NTPStatusType
	MachineConfigType     = resourcetypes.MachineConfigType

	NTPStatusID     = resourcetypes.NTPStatusID
	MachineConfigID = resourcetypes.MachineConfigID

	CertKindServer        = resourcetypes.CertKindServer
	CertKindImpersonator  = resourcetypes.CertKindImpersonator
	CertKindOSCA          = resourcetypes.CertKindOSCA
	CertKindAcceptedCA    = resourcetypes.CertKindAcceptedCA
	CertKindEtcdCA        = resourcetypes.CertKindEtcdCA
	CertKindEtcd          = resourcetypes.CertKindEtcd
	CertKindEtcdTrustedCA = resourcetypes.CertKindEtcdTrustedCA
)

// The types and their specs.
type (
	CertificateStatus          = resourcetypes.CertificateStatus
	CertificateStatusSpec      = resourcetypes.CertificateStatusSpec
	CertificateStatusExtension = resourcetypes.CertificateStatusExtension
	NTPStatus                  = resourcetypes.NTPStatus
	NTPStatusSpec              = resourcetypes.NTPStatusSpec
	NTPStatusExtension         = resourcetypes.NTPStatusExtension
	MachineConfig              = resourcetypes.MachineConfig
	MachineConfigSpec          = resourcetypes.MachineConfigSpec
	MachineConfigExtension     = resourcetypes.MachineConfigExtension
)

// NewCertificateStatus returns an empty CertificateStatus with id.
func NewCertificateStatus(id resource.ID) *CertificateStatus {
	return resourcetypes.NewCertificateStatus(id)
}

// NewNTPStatus returns an empty NTPStatus.
func NewNTPStatus() *NTPStatus { return resourcetypes.NewNTPStatus() }

// NewMachineConfig returns an empty MachineConfig.
func NewMachineConfig() *MachineConfig { return resourcetypes.NewMachineConfig() }
