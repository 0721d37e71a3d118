package node

import (
	"slices"
	"strconv"
	"testing"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/machined/containerd"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/layout"
	"github.com/aegis-os/aegis/machined/system/runner"
	"github.com/aegis-os/aegis/trustd"
)

// TestContainerOpenFilesCoverConnectionCaps keeps the containers' limit on
// open files above what their connection caps admit, with room for the
// descriptors a server holds besides its callers' connections.
func TestContainerOpenFilesCoverConnectionCaps(t *testing.T) {
	// Open connections and those waiting for a slot each hold a descriptor.
	for name, connections := range map[string]int{
		"apid":   apid.MaxConnections + apid.MaxWaiting,
		"trustd": trustd.MaxConnections + trustd.MaxWaiting + trustd.MaxNodeConnections,
	} {
		if containerOpenFiles < 2*connections {
			t.Errorf("containerOpenFiles %d leaves %s (%d connections) too little room", containerOpenFiles, name, connections)
		}
	}
}

// TestContainersHaveLimits checks the containers of apid, trustd and etcd:
// each has a memory limit with its GOMEMLIMIT and a limit on its tasks.
func TestContainersHaveLimits(t *testing.T) {
	n := &Node{layout: layout.Layout{State: t.TempDir()}, ctr: &containerRuntime{daemon: &containerd.Daemon{}}}

	apid, trustd := &processService{id: "apid"}, &processService{id: "trustd"}
	n.confineAPID(apid)
	n.confineTrustd(trustd, true)

	for _, tt := range []struct {
		spec         *containerSpec
		memory, pids int64
	}{
		{apid.container, containerMemoryLimit, containerPidsLimit},
		{trustd.container, trustdMemoryLimit, containerPidsLimit},
		{n.confineEtcd(), etcdMemoryLimit, containerPidsLimit},
	} {
		cfg := tt.spec.config(runner.ProcessConfig{})
		if cfg.MemoryLimit != tt.memory || !slices.Contains(cfg.Env, "GOMEMLIMIT="+strconv.FormatInt(tt.memory/10*8, 10)) {
			t.Errorf("%s: memory limit %d, env %q; want %d", tt.spec.id, cfg.MemoryLimit, cfg.Env, tt.memory)
		}

		if cfg.PidsLimit != tt.pids {
			t.Errorf("%s: pids limit %d, want %d", tt.spec.id, cfg.PidsLimit, tt.pids)
		}

		if cfg.CPUShares != 0 {
			t.Errorf("%s: CPU shares %d for a process at machined's priority", tt.spec.id, cfg.CPUShares)
		}
	}

	// etcd's server runs at etcd.Nice: its container, with a CPU weight.
	if cfg := n.confineEtcd().config(runner.ProcessConfig{Nice: etcd.Nice}); cfg.CPUShares != runner.SharesOfNice(etcd.Nice) || cfg.CPUShares <= 1024 {
		t.Errorf("etcd: CPU shares %d at nice %d", cfg.CPUShares, etcd.Nice)
	}
}

// TestProcessesHaveGoMemLimit: with the process runtime, apid and trustd
// get the GOMEMLIMIT their containers would have, the only bound on a
// heap that trustd lets grow to five times what is live.
func TestProcessesHaveGoMemLimit(t *testing.T) {
	n := &Node{layout: layout.Layout{State: t.TempDir()}}
	b := &bootState{cfg: &certs.MachineConfig{}}

	for _, tt := range []struct {
		p     *processService
		limit int64
	}{
		{n.apidService(b), containerMemoryLimit},
		{n.trustdService(), trustdMemoryLimit},
	} {
		if want := "GOMEMLIMIT=" + strconv.FormatInt(tt.limit/10*8, 10); !slices.Contains(tt.p.env, want) {
			t.Errorf("%s: environment %q, want %s", tt.p.id, tt.p.env, want)
		}
	}
}

// TestTrustdMemoryHoldsFullTables keeps trustd's GOMEMLIMIT a quarter
// above what it holds live with every table of connections full, so that
// a control plane serving the most workers its tables admit does not
// spend its CPU collecting.
func TestTrustdMemoryHoldsFullTables(t *testing.T) {
	if soft := trustdMemoryLimit / 10 * 8; soft < trustd.MemoryAtFullTables*5/4 {
		t.Fatalf("trustd's GOMEMLIMIT %d MiB holds %d MiB live at full tables with less than a quarter to spare",
			soft>>20, trustd.MemoryAtFullTables>>20)
	}
}
