package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aegis-os/aegis/client/nodeview"
	"github.com/aegis-os/aegis/internal/clock"
)

func newDashboardCommand(e *env) *cobra.Command {
	d := &dashboard{}

	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "A live view of the nodes: stage, services, memory, time, certificates, etcd, events",
		Long: `Show each node's machine stage and readiness, its services, memory, time
sync, certificate expiry and etcd member, from the resource API and the
MachineService, and the nodes' recent events, refreshed every --interval
until interrupted. On a terminal it fills the screen, follows its size, colours
ready, not ready and failed nodes, and takes keys: q, Esc or Ctrl-C end it,
r refreshes at once. Elsewhere (a pipe, a file) each view follows a line with
its time, without control codes. --once prints one view, without control
codes, and ends.`,
		Args: cobra.NoArgs,
	}

	cmd.Flags().DurationVar(&d.interval, "interval", 2*time.Second, "time between refreshes")
	cmd.Flags().BoolVar(&d.once, "once", false, "print one view and end")
	cmd.Flags().IntVar(&d.keep, "events", 10, "recent events shown")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if d.interval < 100*time.Millisecond || d.keep < 0 || d.keep > 1000 {
			return fmt.Errorf("--interval must be at least 100ms and --events between 0 and 1000")
		}

		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			d.s = s

			return d.run(ctx)
		})
	}

	return cmd
}

// dashboard is one `aegisctl dashboard`.
type dashboard struct {
	s        *session
	interval time.Duration
	once     bool
	keep     int

	reader *nodeview.Reader
	events *nodeview.Events
}

func (d *dashboard) run(ctx context.Context) error {
	d.reader = nodeview.New(nodeview.Options{Client: d.s.client, Clock: d.s.e.clock})
	d.events = &nodeview.Events{Keep: d.keep, Format: func(ev *machine.Event) string {
		kind, msg := describeEvent(ev)

		return fmt.Sprintf("%s%s\t%s\t%s", nodeCell(d.s.named(), ev.GetMetadata().GetHostname()), ev.GetId(), kind, msg)
	}}

	if d.once {
		evCtx, cancel := context.WithTimeout(ctx, time.Second)
		d.events.Follow(evCtx, d.s.client, d.s.nodes)
		cancel()

		_, err := io.WriteString(d.s.e.stdout, d.frame(ctx))

		return err
	}

	go func() {
		for ctx.Err() == nil {
			d.events.Follow(ctx, d.s.client, d.s.nodes)
			clock.Sleep(ctx, d.s.e.clock, d.interval)
		}
	}()

	if isTerminal(d.s.e.stdout) {
		return d.runTerminal(ctx)
	}

	// A pipe or a file gets each view after a line with its time, not
	// the codes that redraw a terminal.
	for {
		prefix := "--- " + d.s.e.clock.Now().UTC().Format(time.RFC3339) + "\n"

		if _, err := io.WriteString(d.s.e.stdout, prefix+d.frame(ctx)); err != nil {
			return err
		}

		if !clock.Sleep(ctx, d.s.e.clock, d.interval) {
			return nil
		}
	}
}

// frame renders one view of every node as plain text.
func (d *dashboard) frame(ctx context.Context) string { return d.screen(ctx).String() }

// screen reads every node and lays out one view.
func (d *dashboard) screen(ctx context.Context) screen {
	nodes := d.s.nodes
	if len(nodes) == 0 {
		nodes = []string{""}
	}

	views := make([]nodeview.View, len(nodes))

	var wg sync.WaitGroup

	for i, node := range nodes {
		wg.Go(func() { views[i] = d.reader.Read(ctx, node) })
	}

	wg.Wait()

	var sc screen

	sc.add(lineTitle, fmt.Sprintf("aegis dashboard, context %q, %s", d.s.name, d.s.e.clock.Now().UTC().Format(time.RFC3339)))
	sc.add(lineText, "")

	var (
		b     bytes.Buffer
		kinds = []lineKind{lineHeading}
		waits []string
	)

	tw := newTable(&b)
	header(tw, true, "STAGE\tREADY\tSERVICES\tMEMORY\tTIME\tCERTIFICATES\tETCD")

	for _, v := range views {
		name := v.Node
		if name == "" {
			name = strings.Join(d.s.endpoints, ",")
		}

		kind := nodeRow(tw, name, v, d.s.explain)
		kinds = append(kinds, kind)

		for _, w := range v.Waits {
			waits = append(waits, name+": "+w)
		}
	}

	tw.Flush() //nolint:errcheck // a buffer
	sc.addTable(b.String(), kinds)

	if len(waits) > 0 {
		sc.add(lineText, "")
		sc.add(lineHeading, "NOT READY")
		sc.addAll(lineNotReady, waits)
	}

	sc.add(lineText, "")
	sc.add(lineHeading, "RECENT EVENTS")
	b.Reset()

	tw = newTable(&b)
	for _, ev := range d.events.Recent() {
		fmt.Fprintln(tw, ev)
	}

	tw.Flush() //nolint:errcheck // a buffer
	sc.addTable(b.String(), nil)

	return sc
}

// nodeRow writes a node's row and says how it reads: an error, not ready,
// or ready.
func nodeRow(tw io.Writer, name string, v nodeview.View, explain func(error) error) lineKind {
	if v.Err != nil {
		// One row per node: an error spanning lines would break the table.
		msg := strings.ReplaceAll(explain(v.Err).Error(), "\n", " ")
		fmt.Fprintf(tw, "%s\terror: %s\n", name, msg)

		return lineError
	}

	ready, kind := "no", lineNotReady
	if v.Ready {
		ready, kind = "yes", lineReady
	}

	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, v.Stage, ready, v.Services, v.Memory, v.Time, v.Certs, v.Etcd)

	return kind
}

// isTerminal says whether w is a terminal, where the dashboard runs its
// terminal UI; anything else (a pipe, a file, /dev/null) gets plain text.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)

	return ok && term.IsTerminal(int(f.Fd()))
}
