package machineapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
	"github.com/prometheus/procfs/sysfs"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The host statistics: CPUInfo, CPUFreqStats, LoadAvg, SystemStat,
// DiskStats and NetworkDeviceStats answer what Talos answers, read from
// ProcRoot and SysRoot with prometheus/procfs (which Talos reads them
// with too). A user-mode node is a process on its host, so these are the
// host's figures, the same on every node of a machine; NetworkDeviceStats
// are of the network namespace machined runs in (a node's own in a netns
// cluster). docs/guide/talosctl.md says so.

// CPUInfo reports the host's /proc/cpuinfo, one entry per processor.
func (s *Server) CPUInfo(context.Context, *emptypb.Empty) (*machine.CPUInfoResponse, error) {
	p, err := procfs.NewFS(s.cfg.ProcRoot)
	if err != nil {
		return nil, s.toStatus("CPUInfo", err)
	}

	infos, err := p.CPUInfo()
	if err != nil {
		return nil, s.toStatus("CPUInfo", fmt.Errorf("machineapi: the host's cpuinfo: %w", err))
	}

	out := &machine.CPUsInfo{CpuInfo: make([]*machine.CPUInfo, 0, len(infos))}
	for _, in := range infos {
		out.CpuInfo = append(out.CpuInfo, cpuInfo(in))
	}

	return &machine.CPUInfoResponse{Messages: []*machine.CPUsInfo{out}}, nil
}

func cpuInfo(in procfs.CPUInfo) *machine.CPUInfo {
	return &machine.CPUInfo{
		Processor: uint32(in.Processor), VendorId: in.VendorID, CpuFamily: in.CPUFamily, Model: in.Model,
		ModelName: in.ModelName, Stepping: in.Stepping, Microcode: in.Microcode, CpuMhz: in.CPUMHz,
		CacheSize: in.CacheSize, PhysicalId: in.PhysicalID, Siblings: uint32(in.Siblings), CoreId: in.CoreID,
		ApicId: in.APICID, InitialApicId: in.InitialAPICID, Fpu: in.FPU, FpuException: in.FPUException,
		CpuIdLevel: uint32(in.CPUIDLevel), Wp: in.WP, Flags: in.Flags, Bugs: in.Bugs, BogoMips: in.BogoMips,
		ClFlushSize: uint32(in.CLFlushSize), CacheAlignment: uint32(in.CacheAlignment),
		AddressSizes: in.AddressSizes, PowerManagement: in.PowerManagement,
	}
}

// CPUFreqStats reports each processor's frequencies and governor from the
// host's cpufreq in SysRoot. A processor without cpufreq (a virtual
// machine's, typically) has an empty entry, as in Talos.
func (s *Server) CPUFreqStats(context.Context, *emptypb.Empty) (*machine.CPUFreqStatsResponse, error) {
	sys, err := sysfs.NewFS(s.cfg.SysRoot)
	if err != nil {
		return nil, s.toStatus("CPUFreqStats", err)
	}

	stats, err := sys.SystemCpufreq()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, s.toStatus("CPUFreqStats", fmt.Errorf("machineapi: the host's cpufreq: %w", err))
	}

	out := &machine.CPUsFreqStats{CpuFreqStats: make([]*machine.CPUFreqStats, 0, len(stats))}

	for _, st := range stats {
		f := &machine.CPUFreqStats{}

		if st.CpuinfoCurrentFrequency != nil && st.CpuinfoMinimumFrequency != nil && st.CpuinfoMaximumFrequency != nil {
			f = &machine.CPUFreqStats{
				CurrentFrequency: *st.CpuinfoCurrentFrequency, MinimumFrequency: *st.CpuinfoMinimumFrequency,
				MaximumFrequency: *st.CpuinfoMaximumFrequency, Governor: st.Governor,
			}
		}

		out.CpuFreqStats = append(out.CpuFreqStats, f)
	}

	return &machine.CPUFreqStatsResponse{Messages: []*machine.CPUsFreqStats{out}}, nil
}

// LoadAvg reports the host's load averages.
func (s *Server) LoadAvg(context.Context, *emptypb.Empty) (*machine.LoadAvgResponse, error) {
	p, err := procfs.NewFS(s.cfg.ProcRoot)
	if err != nil {
		return nil, s.toStatus("LoadAvg", err)
	}

	l, err := p.LoadAvg()
	if err != nil {
		return nil, s.toStatus("LoadAvg", fmt.Errorf("machineapi: the host's loadavg: %w", err))
	}

	return &machine.LoadAvgResponse{Messages: []*machine.LoadAvg{{Load1: l.Load1, Load5: l.Load5, Load15: l.Load15}}}, nil
}

// SystemStat reports the host's /proc/stat: CPU time in total and per
// processor (by its number), interrupts, context switches, processes.
func (s *Server) SystemStat(context.Context, *emptypb.Empty) (*machine.SystemStatResponse, error) {
	p, err := procfs.NewFS(s.cfg.ProcRoot)
	if err != nil {
		return nil, s.toStatus("SystemStat", err)
	}

	st, err := p.Stat()
	if err != nil {
		return nil, s.toStatus("SystemStat", fmt.Errorf("machineapi: the host's stat: %w", err))
	}

	out := &machine.SystemStat{
		BootTime: st.BootTime, CpuTotal: cpuStat(st.CPUTotal), IrqTotal: st.IRQTotal, Irq: st.IRQ,
		ContextSwitches: st.ContextSwitches, ProcessCreated: st.ProcessCreated,
		ProcessRunning: st.ProcessesRunning, ProcessBlocked: st.ProcessesBlocked, SoftIrqTotal: st.SoftIRQTotal,
		SoftIrq: &machine.SoftIRQStat{
			Hi: st.SoftIRQ.Hi, Timer: st.SoftIRQ.Timer, NetTx: st.SoftIRQ.NetTx, NetRx: st.SoftIRQ.NetRx,
			Block: st.SoftIRQ.Block, BlockIoPoll: st.SoftIRQ.BlockIoPoll, Tasklet: st.SoftIRQ.Tasklet,
			Sched: st.SoftIRQ.Sched, Hrtimer: st.SoftIRQ.Hrtimer, Rcu: st.SoftIRQ.Rcu,
		},
	}

	// Processors by number; one missing from /proc/stat (offline) leaves
	// an empty entry at its place.
	if len(st.CPU) > 0 {
		out.Cpu = make([]*machine.CPUStat, slices.Max(slices.Collect(maps.Keys(st.CPU)))+1)
		for i := range out.Cpu {
			out.Cpu[i] = &machine.CPUStat{}
		}

		for n, c := range st.CPU {
			out.Cpu[n] = cpuStat(c)
		}
	}

	return &machine.SystemStatResponse{Messages: []*machine.SystemStat{out}}, nil
}

func cpuStat(c procfs.CPUStat) *machine.CPUStat {
	return &machine.CPUStat{
		User: c.User, Nice: c.Nice, System: c.System, Idle: c.Idle, Iowait: c.Iowait, Irq: c.IRQ,
		SoftIrq: c.SoftIRQ, Steal: c.Steal, Guest: c.Guest, GuestNice: c.GuestNice,
	}
}

// DiskStats reports the host's /proc/diskstats per device, and their sum.
func (s *Server) DiskStats(context.Context, *emptypb.Empty) (*machine.DiskStatsResponse, error) {
	b, err := blockdevice.NewFS(s.cfg.ProcRoot, s.cfg.SysRoot)
	if err != nil {
		return nil, s.toStatus("DiskStats", err)
	}

	disks, err := b.ProcDiskstats()
	if err != nil {
		return nil, s.toStatus("DiskStats", fmt.Errorf("machineapi: the host's diskstats: %w", err))
	}

	out := &machine.DiskStats{Devices: make([]*machine.DiskStat, 0, len(disks)), Total: &machine.DiskStat{}}

	for _, d := range disks {
		st := &machine.DiskStat{
			Name: d.DeviceName, ReadCompleted: d.ReadIOs, ReadMerged: d.ReadMerges, ReadSectors: d.ReadSectors,
			ReadTimeMs: d.ReadTicks, WriteCompleted: d.WriteIOs, WriteMerged: d.WriteMerges,
			WriteSectors: d.WriteSectors, WriteTimeMs: d.WriteTicks, IoInProgress: d.IOsInProgress,
			IoTimeMs: d.IOsTotalTicks, IoTimeWeightedMs: d.WeightedIOTicks, DiscardCompleted: d.DiscardIOs,
			DiscardMerged: d.DiscardMerges, DiscardSectors: d.DiscardSectors, DiscardTimeMs: d.DiscardTicks,
		}

		out.Devices = append(out.Devices, st)
		addDiskStat(out.Total, st)
	}

	return &machine.DiskStatsResponse{Messages: []*machine.DiskStats{out}}, nil
}

func addDiskStat(t, d *machine.DiskStat) {
	t.ReadCompleted += d.ReadCompleted
	t.ReadMerged += d.ReadMerged
	t.ReadSectors += d.ReadSectors
	t.ReadTimeMs += d.ReadTimeMs
	t.WriteCompleted += d.WriteCompleted
	t.WriteMerged += d.WriteMerged
	t.WriteSectors += d.WriteSectors
	t.WriteTimeMs += d.WriteTimeMs
	t.IoInProgress += d.IoInProgress
	t.IoTimeMs += d.IoTimeMs
	t.IoTimeWeightedMs += d.IoTimeWeightedMs
	t.DiscardCompleted += d.DiscardCompleted
	t.DiscardMerged += d.DiscardMerged
	t.DiscardSectors += d.DiscardSectors
	t.DiscardTimeMs += d.DiscardTimeMs
}

// NetworkDeviceStats reports /proc/net/dev of machined's network
// namespace per device, and their sum.
func (s *Server) NetworkDeviceStats(context.Context, *emptypb.Empty) (*machine.NetworkDeviceStatsResponse, error) {
	p, err := procfs.NewFS(s.cfg.ProcRoot)
	if err != nil {
		return nil, s.toStatus("NetworkDeviceStats", err)
	}

	devs, err := p.NetDev()
	if err != nil {
		return nil, s.toStatus("NetworkDeviceStats", fmt.Errorf("machineapi: net/dev: %w", err))
	}

	out := &machine.NetworkDeviceStats{Total: netDev(devs.Total())}

	for _, name := range slices.Sorted(maps.Keys(devs)) {
		out.Devices = append(out.Devices, netDev(devs[name]))
	}

	return &machine.NetworkDeviceStatsResponse{Messages: []*machine.NetworkDeviceStats{out}}, nil
}

func netDev(d procfs.NetDevLine) *machine.NetDev {
	return &machine.NetDev{
		Name: d.Name, RxBytes: d.RxBytes, RxPackets: d.RxPackets, RxErrors: d.RxErrors, RxDropped: d.RxDropped,
		RxFifo: d.RxFIFO, RxFrame: d.RxFrame, RxCompressed: d.RxCompressed, RxMulticast: d.RxMulticast,
		TxBytes: d.TxBytes, TxPackets: d.TxPackets, TxErrors: d.TxErrors, TxDropped: d.TxDropped,
		TxFifo: d.TxFIFO, TxCollisions: d.TxCollisions, TxCarrier: d.TxCarrier, TxCompressed: d.TxCompressed,
	}
}
