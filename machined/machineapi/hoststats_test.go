package machineapi

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"
)

// TestHostStatistics reads a fixed /proc and /sys tree (testdata/host):
// each method answers the figures there, as Talos answers them; a
// processor without cpufreq has an empty entry.
func TestHostStatistics(t *testing.T) {
	s := New(Config{ProcRoot: "testdata/host/proc", SysRoot: "testdata/host/sys"})
	ctx := context.Background()
	none := &emptypb.Empty{}

	info, err := s.CPUInfo(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	if cpus := info.GetMessages()[0].GetCpuInfo(); len(cpus) != 2 || cpus[1].GetProcessor() != 1 || cpus[1].GetCoreId() != "1" ||
		cpus[0].GetModelName() != "Intel(R) Xeon(R) Test CPU @ 2.00GHz" || cpus[0].GetCpuMhz() != 2000 || cpus[0].GetFlags()[2] != "sse" {
		t.Errorf("CPUInfo: %v", cpus)
	}

	freq, err := s.CPUFreqStats(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	if f := freq.GetMessages()[0].GetCpuFreqStats(); len(f) != 2 || f[0].GetCurrentFrequency() != 1800000 ||
		f[0].GetMaximumFrequency() != 3000000 || f[0].GetGovernor() != "performance" || f[1].GetMaximumFrequency() != 0 {
		t.Errorf("CPUFreqStats: %v", f)
	}

	load, err := s.LoadAvg(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	if l := load.GetMessages()[0]; l.GetLoad1() != 0.25 || l.GetLoad5() != 0.5 || l.GetLoad15() != 0.75 {
		t.Errorf("LoadAvg: %v", l)
	}

	stat, err := s.SystemStat(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	// USER_HZ ticks become seconds, as procfs and Talos give them.
	if st := stat.GetMessages()[0]; st.GetBootTime() != 1795800000 || st.GetContextSwitches() != 5678 || len(st.GetCpu()) != 2 ||
		st.GetCpu()[1].GetUser() != 0.4 || st.GetCpuTotal().GetIdle() != 40 || st.GetProcessRunning() != 2 || st.GetSoftIrq().GetRcu() != 10 {
		t.Errorf("SystemStat: %v", st)
	}

	disks, err := s.DiskStats(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	if d := disks.GetMessages()[0]; len(d.GetDevices()) != 2 || d.GetDevices()[0].GetName() != "vda" ||
		d.GetTotal().GetReadCompleted() != 110 || d.GetTotal().GetWriteSectors() != 4400 || d.GetTotal().GetDiscardCompleted() != 5 || d.GetTotal().GetDiscardSectors() != 40 {
		t.Errorf("DiskStats: %v", d)
	}

	net, err := s.NetworkDeviceStats(ctx, none)
	if err != nil {
		t.Fatal(err)
	}

	if n := net.GetMessages()[0]; len(n.GetDevices()) != 2 || n.GetDevices()[0].GetName() != "eth0" ||
		n.GetTotal().GetRxBytes() != 6000 || n.GetTotal().GetTxDropped() != 1 || n.GetDevices()[0].GetRxMulticast() != 3 {
		t.Errorf("NetworkDeviceStats: %v", n)
	}
}

// TestHostStatisticsMissing: a tree without the files answers an error
// that names what could not be read, never a reply of zeros.
func TestHostStatisticsMissing(t *testing.T) {
	s := New(Config{ProcRoot: t.TempDir(), SysRoot: t.TempDir()})

	if _, err := s.LoadAvg(context.Background(), &emptypb.Empty{}); err == nil {
		t.Fatal("LoadAvg without /proc/loadavg answered")
	}
}
