package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/client/cosiread"
)

// newGetCommand is `get TYPE [ID]`: the node's resources, as talosctl get
// shows them.
func newGetCommand(e *env) *cobra.Command {
	var (
		namespace string
		watch     bool
	)

	cmd := &cobra.Command{
		Use:   "get TYPE [ID]",
		Short: "Show the resources of a type on each node (as talosctl get)",
		Long: `Show the resources of TYPE (a type, its name or an alias, as 'get rd' lists
them), or the one with ID, on each node. With --watch, print them and then
every change until interrupted: + created, blank updated, - destroyed.

'get members' lists the cluster's nodes as a control plane's etcd keeps them
(every control plane, and every worker that joined through trustd): ask a
control plane (the endpoint, or -n); workers run no etcd. A node that stops
refreshing its entry leaves the list after three heartbeat intervals.`,
		Example: `  aegisctl get rd
  aegisctl get members
  aegisctl -n 127.5.0.2,127.5.0.3 get machinestatus
  aegisctl get certs server -o yaml
  aegisctl get services --watch`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeGetKind,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().StringVar(&namespace, "namespace", "", "the resources' namespace (default: the type's own)")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print every change until interrupted")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if membersKinds[args[0]] && len(args) == 1 && !watch {
			return getMembers(e, cmd, *format)
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			g := &getter{s: s, format: *format, kind: args[0], namespace: namespace, watch: watch}
			if len(args) == 2 {
				g.id = args[1]
			}

			return g.run(ctx)
		})
	}

	return cmd
}

// getter runs one get command on each node of the session, one call per
// node (`node` routing: the resource API is not fanned out).
type getter struct {
	s                   *session
	format              outputFormat
	kind, namespace, id string
	watch               bool

	mu      sync.Mutex // output lines of concurrent watches whole
	printed bool       // the table header is out
	w       io.Writer  // the output: aligned in columns unless watching
}

func (g *getter) run(ctx context.Context) error {
	g.w = g.s.e.stdout

	if !g.watch && g.format == formatTable {
		tw := newTable(g.s.e.stdout)
		defer tw.Flush() //nolint:errcheck // a terminal or buffer

		g.w = tw
	}

	nodes := g.s.nodes
	if len(nodes) == 0 {
		nodes = []string{""}
	}

	var (
		wg     sync.WaitGroup
		failed []nodeFailure
		fmu    sync.Mutex
	)

	for _, node := range nodes {
		one := func() {
			if err := g.node(ctx, node); err != nil {
				fmu.Lock()
				failed = append(failed, nodeFailure{node: node, text: g.s.explain(err).Error()})
				fmu.Unlock()
			}
		}

		if !g.watch {
			one()

			continue
		}

		wg.Go(one)
	}

	wg.Wait()

	return g.failure(failed, len(nodes))
}

// failure reports the nodes that failed, as other node commands do.
func (g *getter) failure(failed []nodeFailure, total int) error {
	if len(failed) == 0 {
		return nil
	}

	if total == 1 && failed[0].node == "" {
		return fmt.Errorf("%s", failed[0].text)
	}

	for _, f := range failed {
		fmt.Fprintf(g.s.e.stderr, "%s: error: %s\n", f.node, f.text)
	}

	return &partialError{failed: failed, total: total}
}

// node lists, gets or watches on one node.
func (g *getter) node(ctx context.Context, node string) error {
	q := cosiread.Query{Client: g.s.client, Node: node, Kind: g.kind, Namespace: g.namespace, ID: g.id}

	found, err := q.Resolve(ctx)
	if err != nil {
		return err
	}

	rd := found.Definition

	if g.watch {
		return q.Watch(ctx, found, func(typ state.EventType, r resource.Resource) error {
			mark := map[state.EventType]string{state.Created: "+", state.Updated: " ", state.Destroyed: "-"}[typ]

			return g.print(node, rd, mark, r)
		})
	}

	items, err := q.Read(ctx, found)
	if err != nil {
		return err
	}

	for _, r := range items {
		if err := g.print(node, rd, "", r); err != nil {
			return err
		}
	}

	return nil
}

// print writes one resource: a table row (its definition's columns after
// the common ones), or a JSON or YAML document with the node, the metadata
// and the spec as the node serves it.
func (g *getter) print(node string, rd *meta.ResourceDefinition, mark string, r resource.Resource) error {
	doc, err := cosiread.Document(node, r)
	if err != nil {
		return err
	}

	g.mu.Lock()
	defer g.mu.Unlock()

	w := g.w

	if tmpl, ok := g.format.jsonpathTemplate(); ok {
		return writeJSONPath(w, tmpl, doc)
	}

	switch g.format {
	case formatYAML:
		out, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}

		_, err = fmt.Fprintf(w, "---\n%s", out)

		return err
	case formatJSON:
		out, err := json.Marshal(doc)
		if err != nil {
			return err
		}

		_, err = fmt.Fprintf(w, "%s\n", out)

		return err
	}

	g.row(w, node, rd, mark, r, doc["spec"])

	return nil
}

// row prints a table row, the header first.
func (g *getter) row(w io.Writer, node string, rd *meta.ResourceDefinition, mark string, r resource.Resource, spec any) {
	cols := rd.TypedSpec().PrintColumns

	if !g.printed {
		g.printed = true

		head := []string{"NAMESPACE", "TYPE", "ID", "VERSION"}
		for _, c := range cols {
			head = append(head, strings.ToUpper(c.Name))
		}

		if g.watch {
			head = append([]string{"*"}, head...)
		}

		fmt.Fprintln(w, nodeCell(g.s.named(), "NODE")+strings.Join(head, "\t"))
	}

	md := r.Metadata()
	cells := []string{md.Namespace(), rd.TypedSpec().DisplayType, md.ID(), md.Version().String()}

	for _, c := range cols {
		cells = append(cells, cosiread.Column(spec, c.JSONPath))
	}

	if g.watch {
		cells = append([]string{mark}, cells...)
	}

	fmt.Fprintln(w, nodeCell(g.s.named(), node)+strings.Join(cells, "\t"))
}
