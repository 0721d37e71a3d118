package machineapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Kernel accounting units of /proc: clock ticks per second (USER_HZ, 100 on
// every architecture Go supports on Linux) and the page size.
const userHZ = 100

// Processes lists the node's processes: machined and every process below
// it (apid, trustd, etcd, containerd and what they start), from /proc. A
// node that runs as a process on a host shows its own tree, never the
// host's other processes; a node that is the host's init shows them all.
func (s *Server) Processes(context.Context, *emptypb.Empty) (*machine.ProcessesResponse, error) {
	procs, err := readProcs(s.cfg.ProcRoot)
	if err != nil {
		return nil, s.toStatus("Processes", err)
	}

	tree := descendants(procs, s.cfg.RootPID)
	if len(tree) > MaxProcesses {
		tree = tree[:MaxProcesses]
	}

	return &machine.ProcessesResponse{Messages: []*machine.Process{{Processes: tree}}}, nil
}

// descendants returns root and every process below it, by PID.
func descendants(procs map[int32]*machine.ProcessInfo, root int32) []*machine.ProcessInfo {
	children := map[int32][]int32{}
	for pid, p := range procs {
		children[p.GetPpid()] = append(children[p.GetPpid()], pid)
	}

	var out []*machine.ProcessInfo

	queue := []int32{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]

		if p, ok := procs[pid]; ok {
			out = append(out, p)
		}

		queue = append(queue, children[pid]...)
	}

	slices.SortFunc(out, func(a, b *machine.ProcessInfo) int { return int(a.GetPid() - b.GetPid()) })

	return out
}

// readProcs reads every process of procRoot; a process that ends while it
// is read is left out.
func readProcs(procRoot string) (map[int32]*machine.ProcessInfo, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("machineapi: reading %s: %w", procRoot, err)
	}

	out := map[int32]*machine.ProcessInfo{}

	for _, e := range entries {
		pid, err := strconv.ParseInt(e.Name(), 10, 32)
		if err != nil || len(out) >= MaxProcessesRead {
			continue
		}

		if p, err := readProc(filepath.Join(procRoot, e.Name())); err == nil {
			p.Pid = int32(pid)
			out[p.Pid] = p
		}
	}

	return out, nil
}

// readProc reads one /proc/PID: stat for the numbers, cmdline for the
// arguments, exe where the node may read it.
func readProc(dir string) (*machine.ProcessInfo, error) {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return nil, err
	}

	// The command sits in parentheses and may hold spaces and ')'.
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return nil, fmt.Errorf("machineapi: %s/stat: malformed", dir)
	}

	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 22 {
		return nil, fmt.Errorf("machineapi: %s/stat: %d fields", dir, len(f))
	}

	num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }

	p := &machine.ProcessInfo{
		Command: string(stat[open+1 : end]), State: f[0], Ppid: int32(num(1)), //nolint:gosec // a PID
		Threads: int32(num(17)), //nolint:gosec // a thread count
		CpuTime: float64(num(11)+num(12)) / userHZ, VirtualMemory: num(20),
		ResidentMemory: num(21) * uint64(os.Getpagesize()),
	}

	if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		p.Args = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		p.Executable = exe
	}

	return p, nil
}
