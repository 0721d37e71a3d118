package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "github.com/cosi-project/runtime/api/v1alpha1" // cosi.resource.State's descriptors
	_ "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	_ "github.com/siderolabs/talos/pkg/machinery/api/machine"
	_ "github.com/siderolabs/talos/pkg/machinery/api/time"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// talosctlCoverage names, for every method of the table of talosctl
// commands in docs/guide/talosctl.md, the end-to-end test that calls it through the Talos
// machinery client. It is the list of what the tests cover: the guide
// claims no more and no less.
var talosctlCoverage = map[string]string{
	"machine.MachineService/Version":                     "TestMachinedNode",
	"machine.MachineService/Memory":                      "TestMachinedNode",
	"machine.MachineService/ServiceList":                 "TestMachinedNode",
	"machine.MachineService/ServiceRestart":              "TestMachinedNode",
	"machine.MachineService/Logs":                        "TestMachinedNode",
	"machine.MachineService/Events":                      "TestMachinedNode",
	"machine.MachineService/Reboot":                      "TestMachinedNode",
	"machine.MachineService/Shutdown":                    "TestMachinedNode",
	"machine.MachineService/Read":                        "TestMachinedNode",
	"machine.MachineService/Bootstrap":                   "TestEtcdCluster",
	"machine.MachineService/EtcdMemberList":              "TestEtcdCluster",
	"machine.MachineService/EtcdStatus":                  "TestEtcdCluster",
	"machine.MachineService/EtcdAlarmList":               "TestEtcdCluster",
	"machine.MachineService/EtcdAlarmDisarm":             "TestEtcdCluster",
	"machine.MachineService/EtcdSnapshot":                "TestEtcdCluster",
	"machine.MachineService/EtcdDefragment":              "TestEtcdCluster",
	"machine.MachineService/EtcdLeaveCluster":            "TestEtcdCluster",
	"machine.MachineService/EtcdRemoveMemberByID":        "TestEtcdCluster",
	"machine.MachineService/EtcdForfeitLeadership":       "TestEtcdCluster",
	"machine.MachineService/EtcdRecover":                 "TestEtcdCluster",
	"machine.MachineService/GenerateClientConfiguration": "TestAuthority",
	"cosi.resource.State/List":                           "TestResourceAPI",
	"cosi.resource.State/Get":                            "TestResourceAPI",
	"cosi.resource.State/Watch":                          "TestResourceAPI",
	"time.TimeService/Time":                              "TestResourceAPI",
	"time.TimeService/TimeCheck":                         "TestResourceAPI",
	"machine.MachineService/Processes":                   "TestResourceAPI",
	"machine.MachineService/Dmesg":                       "TestResourceAPI",
	"machine.MachineService/Rollback":                    "TestResourceAPI",
	"machine.MachineService/Upgrade":                     "TestUpgrade",
	"cluster.ClusterService/HealthCheck":                 "TestMembershipAndClusterHealth",
	"machine.MachineService/Containers":                  "TestContainerdRestarts",
	"machine.MachineService/Stats":                       "TestContainerdRestarts",
	"machine.MachineService/Restart":                     "TestContainerdRestarts",
	"machine.MachineService/ImageList":                   "TestContainerdRestarts",
	"machine.MachineService/Reset":                       "TestReset",
	"machine.MachineService/ApplyConfiguration":          "TestApplyConfiguration",
}

var tableMethod = regexp.MustCompile("`([a-z]+(?:\\.[a-z]+)*\\.[A-Za-z]+/[A-Za-z]+)`")

// talosctlTableMethods returns the methods the guide's talosctl table names.
func talosctlTableMethods(t *testing.T) []string {
	t.Helper()

	guide, err := os.ReadFile("../docs/guide/talosctl.md")
	if err != nil {
		t.Fatal(err)
	}

	_, rest, ok := strings.Cut(string(guide), "<!-- talosctl-table:start -->")
	table, _, ok2 := strings.Cut(rest, "<!-- talosctl-table:end -->")

	if !ok || !ok2 {
		t.Fatal("docs/guide/talosctl.md has no talosctl table between its markers")
	}

	var methods []string
	for _, m := range tableMethod.FindAllStringSubmatch(table, -1) {
		methods = append(methods, m[1])
	}

	return methods
}

// testFuncs maps each Test function of this package to its file's source.
func testFuncs(t *testing.T) map[string]string {
	t.Helper()

	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}

	out := map[string]string{}
	fset := token.NewFileSet()

	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}

		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}

		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				out[fn.Name.Name] = string(src)
			}
		}
	}

	return out
}

// TestTalosctlTableIsCovered: every method of the guide's talosctl table
// exists, is called by the end-to-end test named for it, and every method
// the tests are listed as covering is in the table.
func TestTalosctlTableIsCovered(t *testing.T) {
	table := talosctlTableMethods(t)
	tests := testFuncs(t)

	for _, m := range table {
		svc, name, _ := strings.Cut(m, "/")

		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if sd, ok := d.(protoreflect.ServiceDescriptor); err != nil || !ok || sd.Methods().ByName(protoreflect.Name(name)) == nil {
			t.Errorf("docs/guide/talosctl.md names %s, which is no method", m)
		}

		test, ok := talosctlCoverage[m]
		if !ok {
			t.Errorf("docs/guide/talosctl.md names %s, which no end-to-end test is listed as covering", m)

			continue
		}

		src, ok := tests[test]
		if !ok {
			t.Errorf("%s: test %s does not exist", m, test)
		} else if !strings.Contains(src, name) {
			t.Errorf("%s: the file of %s never mentions %s", m, test, name)
		}
	}

	for m := range talosctlCoverage {
		if !slices.Contains(table, m) {
			t.Errorf("%s is covered by %s but missing from the talosctl table of docs/guide/talosctl.md", m, talosctlCoverage[m])
		}
	}
}
