package authz_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/aegis-os/aegis/api/certificates"
	_ "github.com/aegis-os/aegis/api/machineconfig" // registers the service walked below
	_ "github.com/aegis-os/aegis/api/revocations"   // registers the service walked below
	_ "github.com/aegis-os/aegis/api/rotation"      // registers the service walked below
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
)

// servedServices are the services a node serves through apid; every one of
// their methods must have a rule.
var servedServices = []protoreflect.FullName{
	"machine.MachineService",
	"aegis.tokens.TokenService",
	"aegis.certificates.CertificateService",
	"aegis.revocations.RevocationService",
	"aegis.membership.MembershipService",
	"aegis.machineconfig.MachineConfigService",
	"aegis.rotation.RotationService",
	"aegis.upgrade.BundleService",
	"cluster.ClusterService",
	"cosi.resource.State",
	"time.TimeService",
}

func TestEveryMethodHasARule(t *testing.T) {
	rules := authz.DefaultRules()

	for _, name := range servedServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Fatalf("service %s not registered: %v", name, err)
		}

		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			full := "/" + string(name) + "/" + string(methods.Get(i).Name())
			if _, ok := rules[full]; !ok {
				t.Errorf("method %s has no rule", full)
			}
		}
	}
}

func TestEveryRuleNamesAMethod(t *testing.T) {
	for _, full := range authz.DefaultRules().Methods() {
		svc, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
		if !ok || !strings.HasPrefix(full, "/") {
			t.Errorf("rule %q is not a full method name", full)

			continue
		}

		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			t.Errorf("rule %s: service %s does not exist", full, svc)

			continue
		}

		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok || sd.Methods().ByName(protoreflect.Name(method)) == nil {
			t.Errorf("rule %s names no method", full)
		}
	}
}

func TestNoRuleIsEmptyOrGrantsImpersonator(t *testing.T) {
	for m, s := range authz.DefaultRules() {
		if len(s) == 0 {
			t.Errorf("%s: empty rule allows nobody; leave it out or name a role", m)
		}

		if s.Has(role.Impersonator) {
			t.Errorf("%s: os:impersonator must not be allowed anything by itself", m)
		}

		if !s.Has(role.Admin) {
			t.Errorf("%s: admin must be allowed everything", m)
		}
	}
}

func TestRoleMethodTable(t *testing.T) {
	const (
		version   = machine.MachineService_Version_FullMethodName
		logs      = machine.MachineService_Logs_FullMethodName
		events    = machine.MachineService_Events_FullMethodName
		restart   = machine.MachineService_ServiceRestart_FullMethodName
		reboot    = machine.MachineService_Reboot_FullMethodName
		snapshot  = machine.MachineService_EtcdSnapshot_FullMethodName
		genConfig = machine.MachineService_GenerateClientConfiguration_FullMethodName
		read      = machine.MachineService_Read_FullMethodName
		tokCreate = tokens.TokenService_Create_FullMethodName
		tokList   = tokens.TokenService_List_FullMethodName
		renew     = certificates.CertificateService_Renew_FullMethodName
		unknown   = "/machine.MachineService/NoSuchMethod"
		other     = "/cluster.ClusterService/NoSuchMethod"
		cosiGet   = "/cosi.resource.State/Get"
		cosiWatch = "/cosi.resource.State/Watch"
		cosiWrite = "/cosi.resource.State/Update"
		timeCheck = "/time.TimeService/TimeCheck"
	)

	// allow[method] lists the single roles that may call it; every other
	// single role, and the empty set, must be refused.
	allow := map[string][]role.Role{
		version:   {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		logs:      {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		events:    {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		restart:   {role.Admin, role.Operator},
		reboot:    {role.Admin, role.Operator},
		snapshot:  {role.Admin, role.Operator, role.EtcdBackup},
		genConfig: {role.Admin},
		read:      {role.Admin},
		tokCreate: {role.Admin},
		tokList:   {role.Admin},
		renew:     {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		unknown:   {role.Admin},
		other:     {role.Admin},
		cosiGet:   {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		cosiWatch: {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
		cosiWrite: {role.Admin},
		timeCheck: {role.Admin, role.Operator, role.Reader, role.EtcdBackup},
	}

	rules := authz.DefaultRules()

	for method, allowed := range allow {
		for _, r := range append(role.All(), "") {
			have := role.NewSet(r)
			if r == "" {
				have = role.NewSet()
			}

			want := r != "" && role.NewSet(allowed...).Has(r)

			t.Run(method+"/"+string(r), func(t *testing.T) {
				err := rules.Check(method, have)
				if got := err == nil; got != want {
					t.Fatalf("Check(%s, %v) allowed=%v, want %v (err %v)", method, have, got, want, err)
				}
			})
		}
	}
}

func TestRoleCombinations(t *testing.T) {
	rules := authz.DefaultRules()
	tests := []struct {
		name   string
		method string
		have   role.Set
		want   bool
	}{
		{"reader and operator may restart", machine.MachineService_ServiceRestart_FullMethodName, role.NewSet(role.Reader, role.Operator), true},
		{"impersonator with reader reads", machine.MachineService_Version_FullMethodName, role.NewSet(role.Impersonator, role.Reader), true},
		{"impersonator alone cannot renew", certificates.CertificateService_Renew_FullMethodName, role.NewSet(role.Impersonator), false},
		{"etcd backup cannot reboot", machine.MachineService_Reboot_FullMethodName, role.NewSet(role.EtcdBackup), false},
		{"nil set is no role", machine.MachineService_Version_FullMethodName, nil, false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.Check(tt.method, tt.have) == nil; got != tt.want {
				t.Fatalf("allowed=%v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeniedErrorNamesMethodAndAllowedRoles(t *testing.T) {
	err := authz.DefaultRules().Check(machine.MachineService_ServiceRestart_FullMethodName, role.NewSet(role.Reader))

	var denied *authz.DeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("err = %v, want *DeniedError", err)
	}

	msg := err.Error()
	for _, want := range []string{machine.MachineService_ServiceRestart_FullMethodName, "os:admin", "os:operator", "os:reader"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestRulesCloneIsIndependent(t *testing.T) {
	r := authz.DefaultRules()
	c := r.Clone()

	r[machine.MachineService_Read_FullMethodName][role.Reader] = struct{}{}

	if c.Allowed(machine.MachineService_Read_FullMethodName).Has(role.Reader) {
		t.Fatal("clone shares its sets with the original")
	}
}
