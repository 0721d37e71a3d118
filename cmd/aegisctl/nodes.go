package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

// nodeCommands returns the commands that drive nodes through their API.
func nodeCommands(e *env) []*cobra.Command {
	return []*cobra.Command{
		newVersionCommand(e), newHostnameCommand(e), newMemoryCommand(e),
		newServiceCommand(e), newLogsCommand(e), newEventsCommand(e), newHealthCommand(e),
		newRebootCommand(e), newShutdownCommand(e), newResetCommand(e), newTokenCommand(e),
		newBootstrapCommand(e), newEtcdCommand(e), newGetCommand(e), newDashboardCommand(e),
		newContainersCommand(e), newStatsCommand(e), newRestartCommand(e), newImageCommand(e),
		newApplyConfigCommand(e), newPatchCommand(e), newRotateCACommand(e), newMembersCommand(e),
		newUpgradeCommand(e),
	}
}

// unaryCommand is what one node command does with a unary call: make it,
// and print its reply as a table.
type unaryCommand[R proto.Message] struct {
	call  func(ctx context.Context, c *client.Client) (R, error)
	table func(w io.Writer, resp R, named bool)
	// wide is the table of -o wide, with more columns; nil for a command
	// made with addOutputFlag, which refuses wide.
	wide func(w io.Writer, resp R, named bool)
	// plain prints table's output as it is, not aligned in columns.
	plain bool
}

// run makes the call on the session's nodes and prints the reply, as a
// table or as the reply itself in JSON or YAML. A node that failed shows in
// the output and makes the command fail once everything is printed.
func (u unaryCommand[R]) run(e *env, cmd *cobra.Command, format outputFormat) error {
	return e.withSession(cmd, func(ctx context.Context, s *session) error {
		resp, err := u.call(s.nodeContext(ctx), s.client)
		if err != nil {
			return s.explain(err)
		}

		table := u.table
		if format == formatWide && u.wide != nil {
			table, format = u.wide, formatTable
		}

		if err = printReply(e.stdout, format, resp, u.plain, func(w io.Writer) { table(w, resp, s.named()) }); err != nil {
			return err
		}

		return failedNodes(resp)
	})
}

// printReply prints resp in format; table does it for the table format,
// into aligned columns unless plain is set.
func printReply(w io.Writer, format outputFormat, resp proto.Message, plain bool, table func(io.Writer)) error {
	if format != formatTable {
		return writeReply(w, format, resp)
	}

	if plain {
		table(w)

		return nil
	}

	tw := newTable(w)
	table(tw)

	return tw.Flush()
}

// table is the tabwriter of every node command's table, spaced as
// talosctl's, over a buffer of its output. tabwriter writes each cell and
// each run of padding apart: straight to a terminal or a pipe that was a
// system call each, some 120,000 for the 10,000 members of a large
// cluster, and most of aegisctl's time for `get members`. Flush writes the
// aligned rows out in large writes.
type table struct {
	*tabwriter.Writer

	out *bufio.Writer
}

func newTable(w io.Writer) *table {
	out := bufio.NewWriterSize(w, tableBuffer)

	return &table{Writer: tabwriter.NewWriter(out, 0, 4, 3, ' ', 0), out: out}
}

// Flush aligns the rows written since the last Flush and writes them out.
func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}

	return t.out.Flush()
}

// header prints a table's header, with a NODE column first when nodes are
// named.
func header(w io.Writer, named bool, columns string) {
	if named {
		columns = "NODE\t" + columns
	}

	fmt.Fprintln(w, columns)
}

// nodeCell is the NODE cell of a row when nodes are named, else nothing.
func nodeCell(named bool, node string) string {
	if !named {
		return ""
	}

	return node + "\t"
}
