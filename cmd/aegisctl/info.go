package main

import (
	"context"
	"fmt"
	"io"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/client/nodeview"
	"github.com/aegis-os/aegis/internal/version"
)

func newVersionCommand(e *env) *cobra.Command {
	var clientOnly, short bool

	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the version of each node",
		Args:  cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client's version only")
	cmd.Flags().BoolVar(&short, "short", false, "print the version tag only (table output)")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *format == formatTable {
			fmt.Fprintln(e.stdout, "Client:")
			writeVersion(e.stdout, clientVersion(), short)

			if clientOnly {
				return nil
			}

			fmt.Fprintln(e.stdout, "Server:")
		} else if clientOnly {
			return writeReply(e.stdout, *format, &machine.VersionResponse{Messages: []*machine.Version{{Version: clientVersion()}}})
		}

		return unaryCommand[*machine.VersionResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.VersionResponse, error) {
				return c.MachineClient.Version(ctx, &emptypb.Empty{})
			},
			table: func(w io.Writer, resp *machine.VersionResponse, named bool) { versionTable(w, resp, named, short) },
			plain: true,
		}.run(e, cmd, *format)
	}

	return cmd
}

func clientVersion() *machine.VersionInfo {
	v := version.Get()

	return &machine.VersionInfo{Tag: v.Tag, Sha: v.Commit, Built: v.Built, GoVersion: v.GoVersion, Os: v.OS, Arch: v.Arch}
}

// writeVersion prints a version the way talosctl does. A node's tag
// (version.TalosTag) is printed as Aegis's own version, and the Talos API
// version it carries on a line of its own. Short prints the tag alone.
func writeVersion(w io.Writer, v *machine.VersionInfo, short bool) {
	tag, talosAPI, aegis := version.FromTalosTag(v.GetTag())
	if !aegis {
		tag = v.GetTag()
	}

	if short {
		fmt.Fprintf(w, "\tTag:         %s\n", tag)

		return
	}

	fmt.Fprintf(w, "\tTag:         %s\n\tSHA:         %s\n\tBuilt:       %s\n\tGo version:  %s\n\tOS/Arch:     %s/%s\n",
		tag, v.GetSha(), v.GetBuilt(), v.GetGoVersion(), v.GetOs(), v.GetArch())

	if aegis {
		fmt.Fprintf(w, "\tTalos API:   %s\n", talosAPI)
	}
}

// versionTable prints each node's version under its name; it is a list of
// blocks rather than a table, as talosctl's. Short prints each tag alone.
func versionTable(w io.Writer, resp *machine.VersionResponse, named, short bool) {
	for _, m := range resp.GetMessages() {
		if named {
			fmt.Fprintf(w, "\tNODE:        %s\n", m.GetMetadata().GetHostname())
		}

		if f := failureOf(m.GetMetadata()); f != nil {
			fmt.Fprintf(w, "\terror:       %s\n", f.text)

			continue
		}

		writeVersion(w, m.GetVersion(), short)

		if p := m.GetPlatform(); p != nil && !short {
			fmt.Fprintf(w, "\tPlatform:    %s (%s)\n", p.GetName(), p.GetMode())
		}
	}
}

func newHostnameCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hostname",
		Short: "Print the hostname of each node",
		Args:  cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.HostnameResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.HostnameResponse, error) {
				return c.MachineClient.Hostname(ctx, &emptypb.Empty{})
			},
			table: hostnameTable,
		}.run(e, cmd, *format)
	}

	return cmd
}

func hostnameTable(w io.Writer, resp *machine.HostnameResponse, named bool) {
	if named {
		header(w, named, "HOSTNAME")
	}

	eachNode(w, resp.GetMessages(), func(m *machine.Hostname) {
		fmt.Fprintf(w, "%s%s\n", nodeCell(named, m.GetMetadata().GetHostname()), m.GetHostname())
	})
}

func newMemoryCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "memory",
		Aliases: []string{"free"},
		Short:   "Show each node's memory use, in MiB",
		Long: `Show each node's memory use in MiB, as free(1) does: TOTAL, USED (total less
free, buffers and cache), FREE, SHARED, BUFFERS, CACHE and AVAILABLE.`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.MemoryResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.MemoryResponse, error) {
				return c.MachineClient.Memory(ctx, &emptypb.Empty{})
			},
			table: memoryTable,
		}.run(e, cmd, *format)
	}

	return cmd
}

func memoryTable(w io.Writer, resp *machine.MemoryResponse, named bool) {
	header(w, named, "TOTAL\tUSED\tFREE\tSHARED\tBUFFERS\tCACHE\tAVAILABLE")

	eachNode(w, resp.GetMessages(), func(m *machine.Memory) {
		mi := m.GetMeminfo()
		fmt.Fprintf(w, "%s%d\t%d\t%d\t%d\t%d\t%d\t%d\n", nodeCell(named, m.GetMetadata().GetHostname()),
			mib(mi.GetMemtotal()), mib(nodeview.UsedKiB(mi)), mib(mi.GetMemfree()), mib(mi.GetShmem()),
			mib(mi.GetBuffers()), mib(mi.GetCached()), mib(mi.GetMemavailable()))
	})
}

// mib converts the kernel's kB (KiB) to MiB.
func mib(kb uint64) uint64 { return kb / 1024 }
