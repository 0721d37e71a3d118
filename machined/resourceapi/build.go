package resourceapi

import (
	"crypto/fips140"
	"errors"
	"io/fs"
	"strings"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

// ProductName is the Versions resource's name of the product, where Talos
// puts "Talos".
const ProductName = "Aegis"

// platform is what PlatformMetadatas/platformmetadata is made of: the
// platform the Version API names (SetVersion) and the node's hostname
// (SetIdentity). mu is held across the write, so that the two setters
// leave the resource with the last values of both.
type platform struct {
	mu             sync.Mutex
	name, hostname string
}

// SetVersion sets Versions/version to tag, the tag the node's Version API
// answers (Talos's tests compare the two), and the platform of
// PlatformMetadatas/platformmetadata to the one it names.
func (s *State) SetVersion(tag, platformName string) error {
	return errors.Join(
		set(s, runtime.NewVersion(), func(r *runtime.Version) {
			*r.TypedSpec() = runtime.VersionSpec{Name: ProductName, Version: tag}
		}),
		s.setPlatform(func(p *platform) { p.name = platformName }),
	)
}

// setPlatform changes p with update and writes the resource. The platform
// serves no cloud metadata (region, zone, instance): the node is a process
// on a host Aegis knows nothing of beyond its name.
func (s *State) setPlatform(update func(p *platform)) error {
	s.platform.mu.Lock()
	defer s.platform.mu.Unlock()

	update(&s.platform)

	return set(s, runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID), func(r *runtime.PlatformMetadata) {
		*r.TypedSpec() = runtime.PlatformMetadataSpec{Platform: s.platform.name, Hostname: s.platform.hostname}
	})
}

// Where the kernel says what the security fields of SecurityStates describe.
const (
	selinuxEnforcePath = "sys/fs/selinux/enforce"
	moduleSigEnforce   = "sys/module/module/parameters/sig_enforce"
)

// ReadSecurityState is what a user-mode node honestly reports of
// SecurityStates: Aegis boots nothing, so no secure boot, no UKI and no
// signing keys of its own; the rest is the kernel it runs on, read from
// host (the host's root, "/" as an fs.FS): SELinux enforcing or permissive
// from /sys/fs/selinux/enforce (disabled when absent), module signatures
// enforced from sig_enforce; FIPS (strict: fips140=only) is the mode of Aegis's own cryptography
// (Go's FIPS 140-3 module), not the kernel's.
func ReadSecurityState(host fs.FS) runtime.SecurityStateSpec {
	spec := runtime.SecurityStateSpec{SELinuxState: runtime.SELinuxStateDisabled, FIPSState: runtime.FIPSStateDisabled}

	if v, err := fs.ReadFile(host, selinuxEnforcePath); err == nil {
		spec.SELinuxState = runtime.SELinuxStatePermissive
		if strings.TrimSpace(string(v)) == "1" {
			spec.SELinuxState = runtime.SELinuxStateEnforcing
		}
	}

	if v, err := fs.ReadFile(host, moduleSigEnforce); err == nil {
		spec.ModuleSignatureEnforced = strings.TrimSpace(string(v)) == "Y"
	}

	switch {
	case fips140.Enforced():
		spec.FIPSState = runtime.FIPSStateStrict
	case fips140.Enabled():
		spec.FIPSState = runtime.FIPSStateEnabled
	}

	return spec
}

// SetSecurityState sets SecurityStates/securitystate to spec.
func (s *State) SetSecurityState(spec runtime.SecurityStateSpec) error {
	return set(s, runtime.NewSecurityStateSpec(runtime.NamespaceName), func(r *runtime.SecurityState) {
		*r.TypedSpec() = spec
	})
}

// SetUpgradeStatus sets UpgradeStatuses/node to spec: the node's installed
// versions, as its slots record them.
func (s *State) SetUpgradeStatus(spec resourcetypes.UpgradeStatusSpec) error {
	return set(s, resourcetypes.NewUpgradeStatus(), func(r *resourcetypes.UpgradeStatus) { *r.TypedSpec() = spec })
}
