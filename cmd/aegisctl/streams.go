package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func newLogsCommand(e *env) *cobra.Command {
	var (
		follow bool
		tail   int32
	)

	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the log of a service of each node, or machined's own",
		Example: `  aegisctl logs apid --tail 20
  aegisctl -n 127.5.0.2,127.5.0.3 logs trustd -f
  aegisctl logs machined -o json`,
		Long: `Print the log of a service of each node: all of it, or its last --tail lines;
with -f, keep printing new lines until interrupted. With nodes named, each
line starts with its node.

ID is a service the node runs, as 'aegisctl services' lists them (a control
plane runs more than a worker: trustd, etcd), or machined for the node's own
log. Shell completion asks the nodes for their services; when they do not
answer within two seconds it offers apid and machined, which every node has.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLogID,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().Int32Var(&tail, "tail", -1, "print only the last N lines (-1: all)")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			stream, err := s.client.MachineClient.Logs(s.nodeContext(ctx), &machine.LogsRequest{
				Namespace: "system", Driver: common.ContainerDriver_CONTAINERD, Id: args[0], Follow: follow, TailLines: tail,
			})
			if err != nil {
				return s.explain(err)
			}

			lines := newLineSplitter(e.stdout, s.named())
			err = receive(s, stream.Recv, func(d *common.Data) error {
				if *format != formatTable {
					return writeStreamed(e.stdout, *format, d)
				}

				lines.write(d.GetMetadata().GetHostname(), d.GetBytes())

				return nil
			})
			lines.flush()

			return err
		})
	}

	return cmd
}

// lineSplitter prints log data as whole lines, each prefixed with its
// node when nodes are named: a fan-out interleaves chunks of several nodes,
// and a chunk may end in the middle of a line.
type lineSplitter struct {
	w       io.Writer
	named   bool
	pending map[string]*bytes.Buffer
	order   []string
}

func newLineSplitter(w io.Writer, named bool) *lineSplitter {
	return &lineSplitter{w: w, named: named, pending: map[string]*bytes.Buffer{}}
}

func (l *lineSplitter) write(node string, data []byte) {
	buf, ok := l.pending[node]
	if !ok {
		buf = &bytes.Buffer{}
		l.pending[node] = buf
		l.order = append(l.order, node)
	}

	buf.Write(data)

	for {
		i := bytes.IndexByte(buf.Bytes(), '\n')
		if i < 0 {
			return
		}

		l.line(node, buf.Next(i+1))
	}
}

// flush prints what is left of unfinished lines.
func (l *lineSplitter) flush() {
	for _, node := range l.order {
		if buf := l.pending[node]; buf.Len() > 0 {
			l.line(node, append(buf.Bytes(), '\n'))
			buf.Reset()
		}
	}
}

func (l *lineSplitter) line(node string, line []byte) {
	if l.named {
		fmt.Fprintf(l.w, "%s: ", node)
	}

	l.w.Write(line) //nolint:errcheck // terminal output
}

// receive reads a stream until it ends or the command is interrupted. A
// message carrying a node's error is reported on stderr and counted; the
// rest go to handle.
func receive[M interface {
	proto.Message
	GetMetadata() *common.Metadata
}](s *session, recv func() (M, error), handle func(M) error) error {
	var failed []nodeFailure

	for {
		msg, err := recv()

		switch {
		case errors.Is(err, io.EOF):
			if len(failed) > 0 {
				return &partialError{failed: failed, total: max(len(s.nodes), 1)}
			}

			return nil
		case status.Code(err) == codes.Canceled:
			return nil // interrupted: the way out of a follow
		case err != nil:
			return s.explain(err)
		}

		if f := failureOf(msg.GetMetadata()); f != nil {
			fmt.Fprintf(s.e.stderr, "%s: error: %s\n", f.node, f.text)
			failed = append(failed, *f)

			continue
		}

		if err = handle(msg); err != nil {
			return err
		}
	}
}

func newEventsCommand(e *env) *cobra.Command {
	var tail int32

	cmd := &cobra.Command{
		Use:   "events",
		Short: "Stream the events of each node until interrupted",
		Long: `Stream the events of each node (boot sequence and phases, service states,
machine status) until interrupted, starting with the last --tail events.`,
		Args: cobra.NoArgs,
	}

	format := addOutputFlag(cmd)
	cmd.Flags().Int32Var(&tail, "tail", 0, "start with the last N events (-1: all the node holds)")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return e.withSession(cmd, func(ctx context.Context, s *session) error {
			stream, err := s.client.MachineClient.Events(s.nodeContext(ctx), &machine.EventsRequest{TailEvents: tail})
			if err != nil {
				return s.explain(err)
			}

			if *format == formatTable {
				printEventHeader(e.stdout, s.named())
			}

			return receive(s, stream.Recv, func(ev *machine.Event) error {
				// Each node first sends an empty event: its watch is set up.
				if ev.GetData() == nil {
					return nil
				}

				if *format != formatTable {
					return writeStreamed(e.stdout, *format, ev)
				}

				printEvent(e.stdout, s.named(), ev)

				return nil
			})
		})
	}

	return cmd
}

// Events are printed as they come, so their columns have fixed widths
// rather than widths measured over rows that have not arrived yet.
const eventRow = "%-6s %-27s %-20s %s\n"

func printEventHeader(w io.Writer, named bool) {
	if named {
		fmt.Fprintf(w, "%-16s ", "NODE")
	}

	fmt.Fprintf(w, eventRow, "ID", "EVENT", "ACTOR", "MESSAGE")
}

func printEvent(w io.Writer, named bool, ev *machine.Event) {
	if named {
		fmt.Fprintf(w, "%-16s ", ev.GetMetadata().GetHostname())
	}

	kind, msg := describeEvent(ev)
	fmt.Fprintf(w, eventRow, ev.GetId(), kind, orDash(ev.GetActorId()), msg)
}

// describeEvent names an event's kind and summarizes it in a line.
func describeEvent(ev *machine.Event) (string, string) {
	decoded, err := client.UnmarshalEvent(ev)
	if err != nil {
		return strings.TrimPrefix(ev.GetData().GetTypeUrl(), "talos/runtime/"), ""
	}

	kind := strings.TrimPrefix(decoded.TypeURL, "talos/runtime/")

	switch p := decoded.Payload.(type) {
	case *machine.SequenceEvent:
		if p.GetError() != nil {
			return kind, fmt.Sprintf("%s %s: error: %s", p.GetSequence(), p.GetAction(), p.GetError().GetMessage())
		}

		return kind, fmt.Sprintf("%s %s", p.GetSequence(), p.GetAction())
	case *machine.PhaseEvent:
		return kind, fmt.Sprintf("%s %s", p.GetPhase(), p.GetAction())
	case *machine.TaskEvent:
		return kind, fmt.Sprintf("%s %s", p.GetTask(), p.GetAction())
	case *machine.ServiceStateEvent:
		msg := fmt.Sprintf("%s %s: %s", p.GetService(), p.GetAction(), p.GetMessage())

		switch h := p.GetHealth(); {
		case h == nil || h.GetUnknown():
		case h.GetHealthy():
			msg += " (healthy)"
		default:
			msg += " (unhealthy: " + h.GetLastMessage() + ")"
		}

		return kind, msg
	case *machine.MachineStatusEvent:
		return kind, fmt.Sprintf("%s ready=%t", p.GetStage(), p.GetStatus().GetReady())
	case *machine.AddressEvent:
		return kind, fmt.Sprintf("%s %s", p.GetHostname(), strings.Join(p.GetAddresses(), ","))
	case *machine.ConfigLoadErrorEvent:
		return kind, p.GetError()
	default:
		return kind, ""
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}

	return s
}
