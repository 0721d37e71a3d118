package machineapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/internal/version"
)

// Version reports the Aegis build. Its tag is version.TalosTag: the Talos
// API version Aegis implements, which talosctl compares with its own, with
// Aegis's version as build metadata. The platform is "aegis" in mode
// "container": machined runs as an ordinary process, not as PID 1.
func (s *Server) Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error) {
	v := version.Get()

	return &machine.VersionResponse{Messages: []*machine.Version{{
		Version: &machine.VersionInfo{
			Tag: version.TalosTag(), Sha: v.Commit, Built: v.Built, GoVersion: v.GoVersion, Os: v.OS, Arch: v.Arch,
		},
		Platform: &machine.PlatformInfo{Name: "aegis", Mode: "container"},
	}}}, nil
}

// Hostname reports the node's hostname.
func (s *Server) Hostname(context.Context, *emptypb.Empty) (*machine.HostnameResponse, error) {
	return &machine.HostnameResponse{Messages: []*machine.Hostname{{Hostname: s.cfg.Hostname()}}}, nil
}

// Memory reports /proc/meminfo, in kB as the kernel gives it.
func (s *Server) Memory(context.Context, *emptypb.Empty) (*machine.MemoryResponse, error) {
	data, err := os.ReadFile(s.cfg.MemInfoPath)
	if err != nil {
		return nil, s.toStatus("Memory", err)
	}

	info, err := parseMemInfo(data)
	if err != nil {
		return nil, s.toStatus("Memory", err)
	}

	return &machine.MemoryResponse{Messages: []*machine.Memory{{Meminfo: info}}}, nil
}

// parseMemInfo reads the fields of /proc/meminfo that MemInfo carries;
// fields it does not know are skipped, missing ones stay zero.
func parseMemInfo(data []byte) (*machine.MemInfo, error) {
	info := &machine.MemInfo{}
	fields := memInfoFields(info)

	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}

		dst, known := fields[name]
		if !known {
			continue
		}

		value := strings.TrimSuffix(strings.TrimSpace(rest), " kB")

		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("machineapi: meminfo %s: %w", name, err)
		}

		*dst = n
	}

	if info.Memtotal == 0 {
		return nil, fmt.Errorf("machineapi: meminfo has no MemTotal")
	}

	return info, sc.Err()
}

func memInfoFields(m *machine.MemInfo) map[string]*uint64 {
	return map[string]*uint64{
		"MemTotal": &m.Memtotal, "MemFree": &m.Memfree, "MemAvailable": &m.Memavailable,
		"Buffers": &m.Buffers, "Cached": &m.Cached, "SwapCached": &m.Swapcached,
		"Active": &m.Active, "Inactive": &m.Inactive, "Active(anon)": &m.Activeanon,
		"Inactive(anon)": &m.Inactiveanon, "Active(file)": &m.Activefile, "Inactive(file)": &m.Inactivefile,
		"Unevictable": &m.Unevictable, "Mlocked": &m.Mlocked, "SwapTotal": &m.Swaptotal,
		"SwapFree": &m.Swapfree, "Dirty": &m.Dirty, "Writeback": &m.Writeback,
		"AnonPages": &m.Anonpages, "Mapped": &m.Mapped, "Shmem": &m.Shmem, "Slab": &m.Slab,
		"SReclaimable": &m.Sreclaimable, "SUnreclaim": &m.Sunreclaim, "KernelStack": &m.Kernelstack,
		"PageTables": &m.Pagetables, "NFS_Unstable": &m.Nfsunstable, "Bounce": &m.Bounce,
		"WritebackTmp": &m.Writebacktmp, "CommitLimit": &m.Commitlimit, "Committed_AS": &m.Committedas,
		"VmallocTotal": &m.Vmalloctotal, "VmallocUsed": &m.Vmallocused, "VmallocChunk": &m.Vmallocchunk,
		"HardwareCorrupted": &m.Hardwarecorrupted, "AnonHugePages": &m.Anonhugepages,
		"ShmemHugePages": &m.Shmemhugepages, "ShmemPmdMapped": &m.Shmempmdmapped,
		"CmaTotal": &m.Cmatotal, "CmaFree": &m.Cmafree, "HugePages_Total": &m.Hugepagestotal,
		"HugePages_Free": &m.Hugepagesfree, "HugePages_Rsvd": &m.Hugepagesrsvd, "HugePages_Surp": &m.Hugepagessurp,
		"Hugepagesize": &m.Hugepagesize, "DirectMap4k": &m.Directmap4K, "DirectMap2M": &m.Directmap2M,
		"DirectMap1G": &m.Directmap1G,
	}
}
