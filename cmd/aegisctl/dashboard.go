package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/clock"
)

// clearScreen moves the cursor home and clears the terminal before a frame.
const clearScreen = "\x1b[H\x1b[2J"

func newDashboardCommand(e *env) *cobra.Command {
	d := &dashboard{}

	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "A live view of the nodes: stage, services, memory, time, certificates, etcd, events",
		Long: `Show each node's machine stage and readiness, its services, memory, time
sync, certificate expiry and etcd member, from the resource API and the
MachineService, and the nodes' recent events, refreshed every --interval
until interrupted. --once prints one view, without terminal control codes,
and ends.`,
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

	mu     sync.Mutex
	events []string // the last keep events, formatted, oldest first
}

func (d *dashboard) run(ctx context.Context) error {
	if d.once {
		evCtx, cancel := context.WithTimeout(ctx, time.Second)
		d.followEvents(evCtx)
		cancel()

		_, err := io.WriteString(d.s.e.stdout, d.frame(ctx))

		return err
	}

	go func() {
		for ctx.Err() == nil {
			d.followEvents(ctx)
			clock.Sleep(ctx, d.s.e.clock, d.interval)
		}
	}()

	for {
		if _, err := io.WriteString(d.s.e.stdout, clearScreen+d.frame(ctx)); err != nil {
			return err
		}

		if !clock.Sleep(ctx, d.s.e.clock, d.interval) {
			return nil
		}
	}
}

// followEvents keeps the nodes' last events until ctx ends or the stream
// breaks.
func (d *dashboard) followEvents(ctx context.Context) {
	stream, err := d.s.client.MachineClient.Events(d.s.nodeContext(ctx), &machine.EventsRequest{TailEvents: int32(d.keep)}) //nolint:gosec // bounded by the flag check
	if err != nil {
		return
	}

	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}

		if ev.GetData() == nil || failureOf(ev.GetMetadata()) != nil {
			continue
		}

		kind, msg := describeEvent(ev)
		line := fmt.Sprintf("%s%s\t%s\t%s", nodeCell(d.s.named(), ev.GetMetadata().GetHostname()), ev.GetId(), kind, msg)

		d.mu.Lock()
		d.events = append(d.events, line)
		if len(d.events) > d.keep {
			d.events = d.events[len(d.events)-d.keep:]
		}
		d.mu.Unlock()
	}
}

// frame renders one view of every node.
func (d *dashboard) frame(ctx context.Context) string {
	nodes := d.s.nodes
	if len(nodes) == 0 {
		nodes = []string{""}
	}

	views := make([]nodeView, len(nodes))

	var wg sync.WaitGroup

	for i, node := range nodes {
		wg.Go(func() { views[i] = d.view(ctx, node) })
	}

	wg.Wait()

	var b bytes.Buffer

	fmt.Fprintf(&b, "aegis dashboard, context %q, %s\n\n", d.s.name, d.s.e.clock.Now().UTC().Format(time.RFC3339))

	tw := newTable(&b)
	header(tw, true, "STAGE\tREADY\tSERVICES\tMEMORY\tTIME\tCERTIFICATES\tETCD")

	var waits []string

	for _, v := range views {
		name := v.node
		if name == "" {
			name = strings.Join(d.s.endpoints, ",")
		}

		if v.err != "" {
			fmt.Fprintf(tw, "%s\terror: %s\n", name, v.err)

			continue
		}

		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, v.stage, v.ready, v.services, v.memory, v.time, v.certs, v.etcd)

		for _, w := range v.waits {
			waits = append(waits, name+": "+w)
		}
	}

	tw.Flush() //nolint:errcheck // a buffer

	if len(waits) > 0 {
		fmt.Fprintf(&b, "\nNOT READY\n%s\n", strings.Join(waits, "\n"))
	}

	d.mu.Lock()
	events := append([]string(nil), d.events...)
	d.mu.Unlock()

	fmt.Fprintf(&b, "\nRECENT EVENTS\n")

	tw = newTable(&b)
	for _, ev := range events {
		fmt.Fprintln(tw, ev)
	}

	tw.Flush() //nolint:errcheck // a buffer

	return b.String()
}

// nodeView is one node's row.
type nodeView struct {
	node, err                                         string
	stage, ready, services, memory, time, certs, etcd string
	waits                                             []string
}

// view reads one node: its machine status first (a node that does not
// answer that is a row of its error), then the rest, each cell saying
// what it could not read.
func (d *dashboard) view(ctx context.Context, node string) nodeView {
	if node != "" {
		ctx = client.WithNode(ctx, node)
	}

	v := nodeView{node: node}
	cosi := d.s.client.COSI

	ms, err := safe.StateGet[*runtime.MachineStatus](ctx, cosi, runtime.NewMachineStatus().Metadata())
	if err != nil {
		v.err = d.s.explain(err).Error()

		return v
	}

	spec := ms.TypedSpec()
	v.stage, v.ready = spec.Stage.String(), "no"

	if spec.Status.Ready {
		v.ready = "yes"
	}

	for _, c := range spec.Status.UnmetConditions {
		v.waits = append(v.waits, c.Name+": "+c.Reason)
	}

	v.services = servicesCell(ctx, d)
	v.memory = memoryCell(ctx, d)
	v.time = timeCell(ctx, d)
	v.certs = certsCell(ctx, d, d.s.e.clock.Now())
	v.etcd = etcdCell(ctx, d)

	return v
}

func servicesCell(ctx context.Context, d *dashboard) string {
	svcs, err := safe.StateListAll[*v1alpha1.Service](ctx, d.s.client.COSI)
	if err != nil {
		return "?"
	}

	var down []string

	for s := range svcs.All() {
		if !s.TypedSpec().Running || !s.TypedSpec().Healthy {
			down = append(down, s.Metadata().ID())
		}
	}

	cell := fmt.Sprintf("%d/%d up", svcs.Len()-len(down), svcs.Len())
	if len(down) > 0 {
		cell += " (down: " + strings.Join(down, ",") + ")"
	}

	return cell
}

func memoryCell(ctx context.Context, d *dashboard) string {
	resp, err := d.s.client.MachineClient.Memory(ctx, &emptypb.Empty{})
	if err != nil || len(resp.GetMessages()) == 0 {
		return "?"
	}

	mi := resp.GetMessages()[0].GetMeminfo()

	return fmt.Sprintf("%d/%d MiB", mib(used(mi)), mib(mi.GetMemtotal()))
}

func timeCell(ctx context.Context, d *dashboard) string {
	ntp, err := safe.StateGet[*resourcetypes.NTPStatus](ctx, d.s.client.COSI, resourcetypes.NewNTPStatus().Metadata())
	if err != nil {
		return "?"
	}

	s := ntp.TypedSpec()

	switch {
	case s.TrustHostClock:
		return "synced (host clock)"
	case !s.Synced && s.Error != "":
		return "NOT synced: " + s.Error
	case !s.Synced:
		return "NOT synced"
	}

	return fmt.Sprintf("synced, %s %+v", s.Server, s.Offset.Round(time.Microsecond))
}

func certsCell(ctx context.Context, d *dashboard, now time.Time) string {
	list, err := safe.StateListAll[*resourcetypes.CertificateStatus](ctx, d.s.client.COSI)
	if err != nil {
		return "?"
	}

	var server, ca time.Time

	for c := range list.All() {
		s := c.TypedSpec()

		switch {
		case s.Kind == resourcetypes.CertKindServer:
			server = s.NotAfter
		case s.Kind == resourcetypes.CertKindAcceptedCA && (ca.IsZero() || s.NotAfter.Before(ca)):
			ca = s.NotAfter
		}
	}

	cell := "server " + untilText(server, now)
	if !ca.IsZero() {
		cell += ", CA " + untilText(ca, now)
	}

	return cell
}

// untilText is how long until t, short: 23h59m, 364d, expired.
func untilText(t, now time.Time) string {
	left := t.Sub(now)

	switch {
	case t.IsZero():
		return "none"
	case left <= 0:
		return "EXPIRED"
	case left >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(left.Hours()/24))
	}

	return strings.TrimSuffix(left.Truncate(time.Minute).String(), "0s")
}

func etcdCell(ctx context.Context, d *dashboard) string {
	list, err := safe.StateListAll[*etcd.Member](ctx, d.s.client.COSI)
	if err != nil {
		return "?"
	}

	if list.Len() == 0 {
		return "-"
	}

	cell := "member " + list.Get(0).TypedSpec().MemberID

	if resp, err := d.s.client.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{}); err == nil && len(resp.GetMessages()) > 0 {
		cell += fmt.Sprintf(" of %d", len(resp.GetMessages()[0].GetMembers()))
	}

	return cell
}
