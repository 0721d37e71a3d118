package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/certs"
)

// applyFlags are the flags apply-config and patch share.
type applyFlags struct {
	mode    string
	timeout time.Duration
	dryRun  bool
}

func (a *applyFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&a.mode, "mode", "m", "auto", "how to apply: auto, no-reboot, reboot, staged or try")
	f.DurationVar(&a.timeout, "timeout", time.Minute, "with --mode try: how long the config stays unless applied again")
	f.BoolVar(&a.dryRun, "dry-run", false, "show what would change, change nothing")
}

// request builds the ApplyConfiguration request for data.
func (a *applyFlags) request(data []byte) (*machine.ApplyConfigurationRequest, error) {
	mode, ok := machine.ApplyConfigurationRequest_Mode_value[strings.ToUpper(strings.ReplaceAll(a.mode, "-", "_"))]
	if !ok {
		return nil, fmt.Errorf("--mode %q: want auto, no-reboot, reboot, staged or try", a.mode)
	}

	req := &machine.ApplyConfigurationRequest{Data: data, Mode: machine.ApplyConfigurationRequest_Mode(mode), DryRun: a.dryRun}
	if req.Mode == machine.ApplyConfigurationRequest_TRY {
		req.TryModeTimeout = durationpb.New(a.timeout)
	}

	return req, nil
}

func newApplyConfigCommand(e *env) *cobra.Command {
	var (
		file  string
		flags applyFlags
	)

	cmd := &cobra.Command{
		Use:   "apply-config -f FILE",
		Short: "Apply a machine config to nodes (admin only)",
		Long: `Send a whole machine config to the nodes, which validate it completely first:
every problem is listed with its field path and nothing changes. Then, by
--mode:
  auto       live fields apply at once; any other change reboots the node
  no-reboot  live fields apply at once; any other change is refused, named
  reboot     write the config and reboot
  staged     write the config, to be used at the next reboot
  try        apply the live fields for --timeout, then roll back unless
             the config is applied again (auto or no-reboot)
Live fields: machine.acceptedCAs, machine.token, machine.previousTokens,
machine.time, and cluster.workerSANs. The node's type (control plane or worker), its cluster's
name and its CAs are never changed this way.`,
		Example: `  aegisctl apply-config -f controlplane.yaml --dry-run
  aegisctl apply-config -f worker.yaml -n 127.0.0.3 --mode try --timeout 2m`,
		Args: cobra.NoArgs,
	}

	cmd.Flags().StringVarP(&file, "file", "f", "", "the machine config to apply (required)")
	flags.add(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return fmt.Errorf("-f FILE is required")
		}

		data, err := readLimited(file)
		if err != nil {
			return err
		}

		req, err := flags.request(data)
		if err != nil {
			return err
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			resp, err := s.client.ApplyConfiguration(s.nodeContext(ctx), req)
			if err != nil {
				return s.explain(err)
			}

			printApplied(e.stdout, resp, s.named())

			return failedNodes(resp)
		})
	}

	return cmd
}

// readLimited reads a document of at most certs.MaxDocumentSize bytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	data, err := io.ReadAll(io.LimitReader(f, certs.MaxDocumentSize+1))
	if err != nil {
		return nil, err
	}

	if len(data) > certs.MaxDocumentSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, certs.MaxDocumentSize)
	}

	return data, nil
}

// printApplied prints each node's answer: what was applied how, and the
// difference.
func printApplied(w io.Writer, resp *machine.ApplyConfigurationResponse, named bool) {
	for _, m := range resp.GetMessages() {
		if f := failureOf(m.GetMetadata()); f != nil {
			fmt.Fprintf(w, "%s: error: %s\n", f.node, f.text)

			continue
		}

		if named {
			fmt.Fprintf(w, "%s:\n", nodeLabel(m.GetMetadata(), ""))
		}

		for _, warn := range m.GetWarnings() {
			fmt.Fprintf(w, "warning: %s\n", warn)
		}

		fmt.Fprint(w, m.GetModeDetails())
	}
}

// currentConfig reads a node's machine config in full (secrets included),
// the base of a patch.
func currentConfig(ctx context.Context, c *client.Client) ([]byte, error) {
	resp, err := machineconfig.NewMachineConfigServiceClient(c.Conn()).Get(ctx, &machineconfig.GetRequest{})
	if err != nil {
		return nil, err
	}

	if err := failedNodes(resp); err != nil {
		return nil, err
	}

	if len(resp.GetMessages()) != 1 {
		return nil, fmt.Errorf("expected the config of one node, got %d", len(resp.GetMessages()))
	}

	return resp.GetMessages()[0].GetData(), nil
}
