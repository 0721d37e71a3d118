package authz

import (
	"fmt"
	"slices"

	cosi "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/api/cluster"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	timeapi "github.com/siderolabs/talos/pkg/machinery/api/time"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/api/tokens"
	upgradeapi "github.com/aegis-os/aegis/api/upgrade"
	"github.com/aegis-os/aegis/authz/role"
)

// Rules maps a full gRPC method name ("/package.Service/Method") to the roles
// that may call it. A caller holding any one of the roles is allowed. A
// method missing from the map is admin-only, so a method added to the API
// later is closed until someone decides otherwise.
type Rules map[string]role.Set

// DefaultRules returns a new copy of Aegis's method table: every method of
// machine.MachineService, cluster.ClusterService, cosi.resource.State,
// time.TimeService, aegis.tokens.TokenService,
// aegis.certificates.CertificateService, aegis.revocations.RevocationService,
// aegis.rotation.RotationService, aegis.upgrade.BundleService
// and aegis.membership.MembershipService, with Talos's split between readers,
// operators, etcd backups and admins. os:impersonator alone is allowed
// nothing: it only carries other callers' roles.
func DefaultRules() Rules {
	// Each group holds the one below it in privilege, except etcd
	// snapshots: os:etcd:backup exists to take them without being an
	// operator, and holds the read-only methods as well.
	var (
		adminOnly  = []role.Role{role.Admin}
		operators  = []role.Role{role.Admin, role.Operator}
		readers    = []role.Role{role.Admin, role.Operator, role.Reader, role.EtcdBackup}
		etcdBackup = []role.Role{role.Admin, role.Operator, role.EtcdBackup}
	)

	r := Rules{}

	r.add(readers,
		// Read-only machine state.
		machine.MachineService_Containers_FullMethodName,
		machine.MachineService_CPUFreqStats_FullMethodName,
		machine.MachineService_CPUInfo_FullMethodName,
		machine.MachineService_DiskStats_FullMethodName,
		machine.MachineService_DiskUsage_FullMethodName,
		machine.MachineService_Dmesg_FullMethodName,
		machine.MachineService_EtcdAlarmList_FullMethodName,
		machine.MachineService_EtcdMemberList_FullMethodName,
		machine.MachineService_EtcdStatus_FullMethodName,
		machine.MachineService_Events_FullMethodName,
		machine.MachineService_Hostname_FullMethodName,
		machine.MachineService_ImageList_FullMethodName,
		machine.MachineService_List_FullMethodName,
		machine.MachineService_LoadAvg_FullMethodName,
		machine.MachineService_Logs_FullMethodName,
		machine.MachineService_LogsContainers_FullMethodName,
		machine.MachineService_Memory_FullMethodName,
		machine.MachineService_Mounts_FullMethodName,
		machine.MachineService_Netstat_FullMethodName,
		machine.MachineService_NetworkDeviceStats_FullMethodName,
		machine.MachineService_Processes_FullMethodName,
		machine.MachineService_ServiceList_FullMethodName,
		machine.MachineService_Stats_FullMethodName,
		machine.MachineService_SystemStat_FullMethodName,
		machine.MachineService_Version_FullMethodName,
		// The node's resources (read-only; the machine config's secrets
		// are redacted for everyone) and its time.
		cosi.State_Get_FullMethodName,
		cosi.State_List_FullMethodName,
		cosi.State_Watch_FullMethodName,
		timeapi.TimeService_Time_FullMethodName,
		timeapi.TimeService_TimeCheck_FullMethodName,
		// Renewing one's own client certificate keeps the roles it already
		// has; every person may do it, a node's impersonator certificate may not.
		certificates.CertificateService_Renew_FullMethodName,
		// The cluster's member list and its health, as in Talos.
		membership.MembershipService_List_FullMethodName,
		membership.MembershipService_Certified_FullMethodName,
		cluster.ClusterService_HealthCheck_FullMethodName,
	)

	r.add(operators,
		// Disruptive but not destructive: power, services, containers,
		// etcd maintenance that loses no data, image pulls, packet capture.
		machine.MachineService_EtcdAlarmDisarm_FullMethodName,
		machine.MachineService_EtcdDefragment_FullMethodName,
		machine.MachineService_ImagePull_FullMethodName,
		machine.MachineService_PacketCapture_FullMethodName,
		machine.MachineService_Reboot_FullMethodName,
		machine.MachineService_Restart_FullMethodName,
		machine.MachineService_ServiceRestart_FullMethodName,
		machine.MachineService_ServiceStart_FullMethodName,
		machine.MachineService_ServiceStop_FullMethodName,
		machine.MachineService_Shutdown_FullMethodName,
	)

	r.add(etcdBackup, machine.MachineService_EtcdSnapshot_FullMethodName)

	r.add(adminOnly,
		// Configuration, secrets, files, destructive etcd operations,
		// upgrades and resets, and credentials.
		machine.MachineService_ApplyConfiguration_FullMethodName,
		machine.MachineService_Bootstrap_FullMethodName,
		machine.MachineService_Copy_FullMethodName,
		machine.MachineService_EtcdDowngradeCancel_FullMethodName,
		machine.MachineService_EtcdDowngradeEnable_FullMethodName,
		machine.MachineService_EtcdDowngradeValidate_FullMethodName,
		machine.MachineService_EtcdForfeitLeadership_FullMethodName,
		machine.MachineService_EtcdLeaveCluster_FullMethodName,
		machine.MachineService_EtcdRecover_FullMethodName,
		machine.MachineService_EtcdRemoveMemberByID_FullMethodName,
		machine.MachineService_GenerateClientConfiguration_FullMethodName,
		machine.MachineService_Kubeconfig_FullMethodName,
		machine.MachineService_MetaDelete_FullMethodName,
		machine.MachineService_MetaWrite_FullMethodName,
		machine.MachineService_Read_FullMethodName,
		machine.MachineService_Reset_FullMethodName,
		machine.MachineService_Rollback_FullMethodName,
		machine.MachineService_Upgrade_FullMethodName,
		// Writes of resources, refused by the node to everyone.
		cosi.State_Create_FullMethodName,
		cosi.State_Destroy_FullMethodName,
		cosi.State_Update_FullMethodName,
		tokens.TokenService_Create_FullMethodName,
		tokens.TokenService_List_FullMethodName,
		tokens.TokenService_Revoke_FullMethodName,
		upgradeapi.BundleService_Upload_FullMethodName,
		revocations.RevocationService_Revoke_FullMethodName,
		revocations.RevocationService_List_FullMethodName,
		rotation.RotationService_Get_FullMethodName,
		rotation.RotationService_Put_FullMethodName,
		rotation.RotationService_Reissue_FullMethodName,
		machineconfig.MachineConfigService_Get_FullMethodName,
		// Taking a node that is gone out of the cluster frees its name.
		membership.MembershipService_Remove_FullMethodName,
		// Served by trustd to nodes holding their own certificate, never
		// through apid: no role of a person writes a node's entry.
		membership.MembershipService_Heartbeat_FullMethodName,
		membership.MembershipService_Leave_FullMethodName,
	)

	return r
}

// add gives roles to methods. A method given twice is a bug in the table.
func (r Rules) add(roles []role.Role, methods ...string) {
	for _, m := range methods {
		if _, dup := r[m]; dup {
			panic(fmt.Sprintf("authz: method %s has two rules", m))
		}

		r[m] = role.NewSet(roles...)
	}
}

// Allowed returns the roles that may call method: its rule, or os:admin
// alone when it has none.
func (r Rules) Allowed(method string) role.Set {
	if s, ok := r[method]; ok {
		return s
	}

	return role.NewSet(role.Admin)
}

// Check decides whether a caller holding have may call method. It returns
// nil or a *DeniedError naming the method and the roles that would allow it.
func (r Rules) Check(method string, have role.Set) error {
	allowed := r.Allowed(method)
	for rl := range have {
		if allowed.Has(rl) {
			return nil
		}
	}

	return &DeniedError{Method: method, Have: have, Allowed: allowed}
}

// Methods returns the methods that have a rule, sorted.
func (r Rules) Methods() []string {
	out := make([]string, 0, len(r))
	for m := range r {
		out = append(out, m)
	}

	slices.Sort(out)

	return out
}

// Clone returns a copy that shares no map with r, so a component keeps its
// rules fixed whatever its caller does with the original afterwards.
func (r Rules) Clone() Rules {
	out := make(Rules, len(r))

	for m, s := range r {
		c := make(role.Set, len(s))
		for rl := range s {
			c[rl] = struct{}{}
		}

		out[m] = c
	}

	return out
}
