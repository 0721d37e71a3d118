package resourcetypes

import (
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/typed"
)

// UpgradeStatusType is the type of the node's installed versions.
const UpgradeStatusType = resource.Type("UpgradeStatuses.aegis.dev")

// UpgradeStatusID is the ID of the node's one UpgradeStatus.
const UpgradeStatusID = resource.ID("node")

// UpgradeStatus is the node's installed versions as its machined records
// them (machined/upgrade): the one it runs, the one kept for a rollback,
// the one staged, the trial of a new version, and the last rollback. The
// node writes it from its own state file; nothing a caller sends goes
// into it. It holds no secret.
type UpgradeStatus = typed.Resource[UpgradeStatusSpec, UpgradeStatusExtension]

// UpgradeStatusSpec is what an operator, or aegisctl upgrade, checks of a
// node's versions. An empty version means none.
type UpgradeStatusSpec struct {
	// ActiveSlot is where the running version is installed: "installed"
	// (the node was never upgraded), or a slot, "a" or "b".
	ActiveSlot    string `yaml:"activeSlot" protobuf:"1"`
	ActiveVersion string `yaml:"activeVersion" protobuf:"2"`
	// PreviousVersion is the version kept for a Rollback (B).
	PreviousVersion string `yaml:"previousVersion,omitempty" protobuf:"3"`
	// StagedVersion becomes active at the node's next start.
	StagedVersion string `yaml:"stagedVersion,omitempty" protobuf:"4"`
	// OnTrial: the active version has not been confirmed healthy yet; the
	// node goes back to PreviousVersion by itself at TrialDeadline.
	OnTrial       bool      `yaml:"onTrial" protobuf:"5"`
	TrialSince    time.Time `yaml:"trialSince,omitempty" protobuf:"6"`
	TrialDeadline time.Time `yaml:"trialDeadline,omitempty" protobuf:"7"`
	// TrialStarts counts the starts of machined on the version on trial.
	TrialStarts int `yaml:"trialStarts,omitempty" protobuf:"8"`
	// LastRollback is the node's last switch back; zero when it never
	// went back.
	LastRollback UpgradeRollback `yaml:"lastRollback,omitempty" protobuf:"9"`
}

// UpgradeRollback is a switch back to the version kept.
type UpgradeRollback struct {
	// At is the node's time of the rollback.
	At   time.Time `yaml:"at" protobuf:"1"`
	From string    `yaml:"from" protobuf:"2"`
	To   string    `yaml:"to" protobuf:"3"`
	// Reason says why: the failed trial, or the operator's request.
	Reason string `yaml:"reason" protobuf:"4"`
	// ByNode: the node went back by itself (a failed trial); otherwise a
	// Rollback was asked through the API.
	ByNode bool `yaml:"byNode" protobuf:"5"`
}

// IsZero reports whether r records no rollback.
func (r UpgradeRollback) IsZero() bool { return r == UpgradeRollback{} }

// DeepCopy implements typed.DeepCopyable.
func (s UpgradeStatusSpec) DeepCopy() UpgradeStatusSpec { return s }

// NewUpgradeStatus returns an empty UpgradeStatus.
func NewUpgradeStatus() *UpgradeStatus {
	return typed.NewResource[UpgradeStatusSpec, UpgradeStatusExtension](
		resource.NewMetadata(NamespaceName, UpgradeStatusType, UpgradeStatusID, resource.VersionUndefined), UpgradeStatusSpec{})
}

// UpgradeStatusExtension gives the type its definition.
type UpgradeStatusExtension struct{}

// ResourceDefinition implements meta.ResourceDefinitionProvider.
func (UpgradeStatusExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{
		Type: UpgradeStatusType, Aliases: []resource.Type{"upgrade"}, DefaultNamespace: NamespaceName,
		PrintColumns: []meta.PrintColumn{
			{Name: "Active", JSONPath: "{.activeVersion}"},
			{Name: "Previous", JSONPath: "{.previousVersion}"},
			{Name: "Staged", JSONPath: "{.stagedVersion}"},
			{Name: "On Trial", JSONPath: "{.onTrial}"},
			{Name: "Last Rollback", JSONPath: "{.lastRollback.reason}"},
		},
	}
}
