package talossuite

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestGuideCommands(t *testing.T) {
	guide := "intro `version`\n<!-- talosctl-table:start -->\n| talosctl command | methods | notes |\n| --- | --- | --- |\n" +
		"| `services`, `service ID` | `machine.MachineService/ServiceList` | |\n" +
		"| `health` (`--server`, the default) | `cluster.ClusterService/HealthCheck` | `x` |\n<!-- talosctl-table:end -->\n`after`\n"

	got, err := GuideCommands([]byte(guide))
	if err != nil {
		t.Fatal(err)
	}

	if want := []string{"services", "service ID", "health"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	if _, err := GuideCommands([]byte("no table")); err == nil {
		t.Error("a guide without markers gave no error")
	}
}

// TestVerbPlanCoversGuide: every command of the guide's talosctl table has
// a command line in the talosctl stage, and every command line is for a
// command of the table.
func TestVerbPlanCoversGuide(t *testing.T) {
	guide, err := os.ReadFile("../../docs/guide/talosctl.md")
	if err != nil {
		t.Fatal(err)
	}

	commands, err := GuideCommands(guide)
	if err != nil {
		t.Fatal(err)
	}

	planned := map[string]bool{}
	for _, v := range verbPlan() {
		planned[v.command] = true

		if !slices.Contains(commands, v.command) {
			t.Errorf("the talosctl stage runs %q, which the guide's table does not list", v.command)
		}
	}

	for _, c := range commands {
		if !planned[c] {
			t.Errorf("the guide lists %q; the talosctl stage has no command line for it (verbPlan)", c)
		}
	}
}

func TestRemoveMemberAndTimeCheck(t *testing.T) {
	r := &verbRunner{
		opts: TalosctlOptions{Nodes: Nodes{ControlPlanes: []string{"127.9.40.2", "127.9.40.3", "127.9.40.4"}, Workers: []string{"a", "b"}}},
		outputs: map[string]string{
			"etcd members": "NODE         ID               HOSTNAME  PEER URLS                 CLIENT URLS               LEARNER\n" +
				"127.9.40.2   2ad1a8bc3e4a09e1  cp-1      https://127.9.40.2:2380   https://127.9.40.2:2379   false\n" +
				"127.9.40.2   5f3c19ab0d2b7c44  cp-2      https://127.9.40.3:2380   https://127.9.40.3:2379   false\n",
			"time [--check SERVER]": "NODE         NTP-SERVER   NODE-TIME    NTP-SERVER-TIME\n127.9.40.2   127.0.0.53   2026-11-28   2026-11-28\n",
		},
	}

	args, err := removeMember(r)
	if err != nil || strings.Join(args, " ") != "etcd remove-member 5f3c19ab0d2b7c44 --nodes 127.9.40.2" {
		t.Errorf("remove-member: %q, %v", args, err)
	}

	args, err = timeCheck(r)
	if err != nil || strings.Join(args, " ") != "time --check 127.0.0.53 --nodes 127.9.40.2" {
		t.Errorf("time --check: %q, %v", args, err)
	}

	r.outputs = map[string]string{
		"time [--check SERVER]": "NODE         NTP-SERVER   NODE-TIME                 NTP-SERVER-TIME\n127.9.40.2                2026-11-28 06:04:28 UTC   2026-11-28 06:04:28 UTC\n",
	}

	var skip notRun
	if _, err := timeCheck(r); !errors.As(err, &skip) {
		t.Errorf("time --check on a node without NTP servers: %v, want a reason not to run it", err)
	}

	if _, err := removeMember(r); err == nil {
		t.Error("remove-member without a member list gave no error")
	}
}

func TestFirstErrorLine(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"error executing bootstrap: 1 error occurred:\n\t* 127.9.40.2: rpc error: code = AlreadyExists desc = etcd is bootstrapped\n\n",
			"error executing bootstrap: 1 error occurred: 127.9.40.2: rpc error: code = AlreadyExists desc = etcd is bootstrapped"},
		{"NODE  ID\n127.9.40.6: error parsing server version: Invalid character(s)\n",
			"127.9.40.6: error parsing server version: Invalid character(s)"},
		{"nothing useful\n", "exit status 1"},
	} {
		if got := firstErrorLine(tc.out, errors.New("exit status 1")); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
