package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/certs"
)

// Shell completion (cobra's 'aegisctl completion SHELL') of what aegisctl
// can know: context names, the current context's endpoints and nodes, the
// services of the nodes, the -o formats. A completion never fails: what
// cannot be read completes to nothing.

// knownServices complete service IDs when the nodes cannot be asked: the
// services every node runs (trustd and etcd run on control planes only, so
// offering them would offer a worker a value that fails).
var knownServices = []string{"apid"}

// serviceActions are the actions of 'service ID ACTION'.
var serviceActions = []string{"status", "start", "stop", "restart"}

const noFiles = cobra.ShellCompDirectiveNoFileComp

// registerCompletions adds the completions of the global flags.
func registerCompletions(e *env, root *cobra.Command) {
	//nolint:errcheck // the flags exist
	root.RegisterFlagCompletionFunc("context", e.completeContexts)
	//nolint:errcheck // the flags exist
	root.RegisterFlagCompletionFunc("nodes", e.completeTargets)
	//nolint:errcheck // the flags exist
	root.RegisterFlagCompletionFunc("endpoints", e.completeTargets)
}

// completionConfig is the client config a completion reads, or nil.
func (e *env) completionConfig() *certs.ClientConfig {
	path, err := e.clientConfigPath()
	if err != nil {
		return nil
	}

	c, err := certs.LoadClientConfig(path)
	if err != nil {
		return nil
	}

	return c
}

// completeContexts completes the names of the client config's contexts.
func (e *env) completeContexts(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c := e.completionConfig()
	if c == nil {
		return nil, noFiles
	}

	return contextNames(c), noFiles
}

// completeContextArg completes the one argument of 'config context NAME'.
func (e *env) completeContextArg(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}

	return e.completeContexts(cmd, args, toComplete)
}

// completeTargets completes -n and -e with the addresses of the context
// (--context, else the current one): its nodes and its endpoints' hosts,
// then the nodes of the local clusters.
// Within a comma list, the part already typed is kept.
func (e *env) completeTargets(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c := e.completionConfig()
	if c == nil {
		return nil, noFiles
	}

	_, ctx, err := pickContext(c, e.target.context)
	if err != nil {
		return nil, noFiles
	}

	var addrs []string

	for _, a := range slices.Concat(ctx.Nodes, ctx.Endpoints, localClusterAddresses()) {
		if a = endpointHost(a); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}

	typed := ""
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		typed = toComplete[:i+1]
	}

	var out []string

	for _, a := range addrs {
		if !slices.Contains(strings.Split(typed, ","), a) {
			out = append(out, typed+a)
		}
	}

	return out, noFiles
}

// completeService completes 'service ID ACTION': the IDs of the nodes'
// services first, then the actions.
func (e *env) completeService(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return e.serviceIDs(cmd), noFiles
	case 1:
		return serviceActions, noFiles
	default:
		return nil, noFiles
	}
}

// completeLogID completes 'logs ID': the services, and machined's own log.
func (e *env) completeLogID(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}

	ids := e.serviceIDs(cmd)
	if !slices.Contains(ids, "machined") {
		ids = append(ids, "machined")
	}

	return ids, noFiles
}

// serviceIDs asks the command's nodes for their services; if they cannot
// be asked, it offers the services every node runs.
func (e *env) serviceIDs(cmd *cobra.Command) []string {
	ids, err := e.askNodes(cmd, func(ctx context.Context, s *session) ([]string, error) {
		resp, err := s.client.MachineClient.ServiceList(s.nodeContext(ctx), &emptypb.Empty{})

		var ids []string

		for _, m := range resp.GetMessages() {
			for _, svc := range m.GetServices() {
				ids = append(ids, svc.GetId())
			}
		}

		return ids, err
	})
	if err != nil {
		return slices.Clone(knownServices)
	}

	return ids
}

// askNodes runs ask on a session of the command's target within
// completionTimeout and returns its values sorted, without repeats.
func (e *env) askNodes(cmd *cobra.Command, ask func(context.Context, *session) ([]string, error)) ([]string, error) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}

	ctx, cancel := context.WithTimeout(parent, completionTimeout)
	defer cancel()

	s, err := e.openSession(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()

	values, err := ask(ctx, s)
	if err != nil {
		return nil, err
	}

	slices.Sort(values)

	return slices.Compact(values), nil
}
