package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
)

// Containerd namespaces, as talosctl names them: -k picks Kubernetes'.
const (
	systemNamespace = "system"
	criNamespace    = "k8s.io"
)

func namespaceOf(kubernetes bool) string {
	if kubernetes {
		return criNamespace
	}

	return systemNamespace
}

func newContainersCommand(e *env) *cobra.Command {
	var kubernetes bool

	cmd := &cobra.Command{
		Use:     "containers",
		Aliases: []string{"c"},
		Short:   "List the containers of each node (the system services on the containerd runtime)",
		Example: `  aegisctl containers
  aegisctl -n 127.5.0.2,127.5.0.3 containers -o json`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&kubernetes, "kubernetes", "k", false, "use the k8s.io namespace instead of system")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.ContainersResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.ContainersResponse, error) {
				return c.MachineClient.Containers(ctx, &machine.ContainersRequest{Namespace: namespaceOf(kubernetes)})
			},
			table: containersTable,
		}.run(e, cmd, *format)
	}

	return cmd
}

func containersTable(w io.Writer, resp *machine.ContainersResponse, named bool) {
	header(w, named, "NAMESPACE\tID\tIMAGE\tPID\tSTATUS")

	eachNode(w, resp.GetMessages(), func(m *machine.Container) {
		for _, c := range m.GetContainers() {
			fmt.Fprintf(w, "%s%s\t%s\t%s\t%d\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				c.GetNamespace(), c.GetId(), c.GetImage(), c.GetPid(), c.GetStatus())
		}
	})
}

func newStatsCommand(e *env) *cobra.Command {
	var kubernetes bool

	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Memory and CPU use of each container of each node, from its cgroup",
		Example: `  aegisctl stats
  aegisctl -n 127.5.0.2,127.5.0.3 stats`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&kubernetes, "kubernetes", "k", false, "use the k8s.io namespace instead of system")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return unaryCommand[*machine.StatsResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.StatsResponse, error) {
				return c.MachineClient.Stats(ctx, &machine.StatsRequest{Namespace: namespaceOf(kubernetes)})
			},
			table: statsTable,
		}.run(e, cmd, *format)
	}

	return cmd
}

func statsTable(w io.Writer, resp *machine.StatsResponse, named bool) {
	header(w, named, "NAMESPACE\tID\tMEMORY(MB)\tCPU")

	eachNode(w, resp.GetMessages(), func(m *machine.Stats) {
		for _, s := range m.GetStats() {
			fmt.Fprintf(w, "%s%s\t%s\t%.2f\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				s.GetNamespace(), s.GetId(), float64(s.GetMemoryUsage())/1e6, time.Duration(s.GetCpuUsage()).Round(time.Millisecond))
		}
	})
}

func newRestartCommand(e *env) *cobra.Command {
	var kubernetes bool

	cmd := &cobra.Command{
		Use:     "restart ID",
		Short:   "Restart a container of each node (its service starts it again)",
		Example: `  aegisctl -n 127.5.0.2 restart trustd`,
		Args:    cobra.ExactArgs(1),
	}

	format := addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&kubernetes, "kubernetes", "k", false, "use the k8s.io namespace instead of system")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return unaryCommand[*machine.RestartResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.RestartResponse, error) {
				return c.MachineClient.Restart(ctx, &machine.RestartRequest{Namespace: namespaceOf(kubernetes), Id: args[0]})
			},
			table: func(w io.Writer, resp *machine.RestartResponse, named bool) {
				header(w, named, "RESPONSE")

				eachNode(w, resp.GetMessages(), func(m *machine.Restart) {
					fmt.Fprintf(w, "%scontainer %q restarted\n", nodeCell(named, m.GetMetadata().GetHostname()), args[0])
				})
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

func newImageCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "The container images of each node"}
	cmd.AddCommand(newImageListCommand(e))

	return cmd
}

func newImageListCommand(e *env) *cobra.Command {
	var namespace string

	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the images of each node's containerd",
		Example: `  aegisctl image list
  aegisctl -n 127.5.0.2,127.5.0.3 image list --namespace system`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().StringVar(&namespace, "namespace", "system", "containerd namespace: system or cri")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ns := common.ContainerdNamespace_NS_SYSTEM

		switch namespace {
		case "system":
		case "cri":
			ns = common.ContainerdNamespace_NS_CRI
		default:
			return fmt.Errorf("--namespace: %q is not system or cri", namespace)
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			stream, err := s.client.MachineClient.ImageList(s.nodeContext(ctx), &machine.ImageListRequest{Namespace: ns})
			if err != nil {
				return s.explain(err)
			}

			tw := newTable(e.stdout)
			if *format == formatTable {
				header(tw, s.named(), "IMAGE\tDIGEST\tSIZE\tCREATED")
			}

			err = receive(s, stream.Recv, func(img *machine.ImageListResponse) error {
				if *format != formatTable {
					return writeStreamed(e.stdout, *format, img)
				}

				fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", nodeCell(s.named(), img.GetMetadata().GetHostname()), img.GetName(),
					img.GetDigest(), strconv.FormatInt(img.GetSize(), 10), img.GetCreatedAt().AsTime().Format(time.RFC3339))

				return nil
			})
			tw.Flush() //nolint:errcheck // to the terminal

			return err
		})
	}

	return cmd
}
