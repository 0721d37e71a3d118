package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/certs"
)

func newPatchCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "patch",
		Short: "Patch a node's configuration (admin only)",
		Args:  cobra.NoArgs,
	}

	cmd.AddCommand(newPatchMachineConfigCommand(e))

	return cmd
}

func newPatchMachineConfigCommand(e *env) *cobra.Command {
	var (
		patches []string
		flags   applyFlags
	)

	cmd := &cobra.Command{
		Use:     "machineconfig --patch @FILE|PATCH",
		Aliases: []string{"mc", "machineconfigs"},
		Short:   "Patch the machine config of nodes and apply it (admin only)",
		Long: `Read each node's machine config, patch it, and apply the result as
apply-config does (same --mode, --timeout and --dry-run). A patch is an RFC
6902 JSON patch (a list of operations) or a strategic merge patch (a partial
config, YAML or JSON, merged in: mappings key by key, lists and values
replaced). --patch takes the patch itself or @FILE, and may be repeated;
patches apply in order.`,
		Example: `  aegisctl patch machineconfig -n 127.0.0.2 --patch '[{"op":"replace","path":"/machine/time/servers","value":["127.0.0.1:1123"]}]'
  aegisctl patch mc --patch @time.yaml --mode no-reboot`,
		Args: cobra.NoArgs,
	}

	cmd.Flags().StringArrayVarP(&patches, "patch", "p", nil, "a patch, or @FILE holding one (repeatable)")
	flags.add(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(patches) == 0 {
			return fmt.Errorf("--patch is required")
		}

		loaded, err := loadPatches(patches)
		if err != nil {
			return err
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			targets := s.nodes
			if len(targets) == 0 {
				targets = []string{""}
			}

			for _, node := range targets {
				if err := patchOne(ctx, e, s, node, loaded, &flags); err != nil {
					return err
				}
			}

			return nil
		})
	}

	return cmd
}

// patchOne patches and applies the config of one node ("" is the
// endpoint's own).
func patchOne(ctx context.Context, e *env, s *session, node string, patches [][]byte, flags *applyFlags) error {
	if node != "" {
		ctx = client.WithNodes(ctx, node)
	}

	current, err := currentConfig(ctx, s.client)
	if err != nil {
		return s.explain(err)
	}

	patched, err := certs.PatchMachineConfig(current, patches)
	if err != nil {
		return err
	}

	req, err := flags.request(patched)
	if err != nil {
		return err
	}

	resp, err := s.client.ApplyConfiguration(ctx, req)
	if err != nil {
		return s.explain(err)
	}

	printApplied(e.stdout, resp, node != "")

	return failedNodes(resp)
}

func loadPatches(args []string) ([][]byte, error) {
	out := make([][]byte, 0, len(args))

	for _, a := range args {
		if path, ok := strings.CutPrefix(a, "@"); ok {
			data, err := readLimited(path)
			if err != nil {
				return nil, fmt.Errorf("--patch %s: %w", a, err)
			}

			out = append(out, data)

			continue
		}

		out = append(out, []byte(a))
	}

	return out, nil
}
