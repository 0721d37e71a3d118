package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"
)

func newEtcdCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Manage the etcd cluster of the control planes",
		Long: `Manage the etcd cluster that the control planes run. members, status and
alarm list are read-only (os:reader) and fan out with -n; snapshot needs
os:etcd:backup; the others change the cluster and need os:admin (defrag and
alarm disarm: os:operator).`,
	}

	cmd.AddCommand(
		etcdUnaryWide(e, "members", "List the etcd members as each node knows them", etcdMembers),
		etcdUnary(e, "status", "Show the status of each node's etcd member", etcdStatus),
		etcdUnary(e, "leave", "Take each node out of the etcd cluster, stop its etcd and remove its data", etcdLeave),
		etcdUnary(e, "forfeit-leadership", "Hand the leadership to another member if the node leads", etcdForfeit),
		etcdUnary(e, "defrag", "Defragment each node's etcd backend", etcdDefrag),
		newEtcdRemoveMemberCommand(e), newEtcdAlarmCommand(e), newEtcdSnapshotCommand(e),
	)

	return cmd
}

type etcdRun = func(e *env, cmd *cobra.Command, format outputFormat) error

func etcdUnary(e *env, use, short string, run etcdRun) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return run(e, cmd, *format) }

	return cmd
}

// etcdUnaryWide is etcdUnary for a command with a wide table.
func etcdUnaryWide(e *env, use, short string, run etcdRun) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	format := addWideOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return run(e, cmd, *format) }

	return cmd
}

func etcdMembers(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*machine.EtcdMemberListResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.EtcdMemberListResponse, error) {
			return c.MachineClient.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
		},
		table: func(w io.Writer, r *machine.EtcdMemberListResponse, named bool) { etcdMembersTable(w, r, named, false) },
		wide:  func(w io.Writer, r *machine.EtcdMemberListResponse, named bool) { etcdMembersTable(w, r, named, true) },
	}.run(e, cmd, format)
}

func etcdStatus(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*machine.EtcdStatusResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.EtcdStatusResponse, error) {
			return c.MachineClient.EtcdStatus(ctx, &emptypb.Empty{})
		},
		table: func(w io.Writer, r *machine.EtcdStatusResponse, named bool) {
			header(w, named, "MEMBER\tDB SIZE\tIN USE\tLEADER\tRAFT INDEX\tRAFT TERM\tAPPLIED\tPROTOCOL\tLEARNER\tERRORS")

			eachNode(w, r.GetMessages(), func(m *machine.EtcdStatus) {
				st := m.GetMemberStatus()
				fmt.Fprintf(w, "%s%016x\t%d\t%d\t%016x\t%d\t%d\t%d\t%s\t%t\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
					st.GetMemberId(), st.GetDbSize(), st.GetDbSizeInUse(), st.GetLeader(), st.GetRaftIndex(), st.GetRaftTerm(),
					st.GetRaftAppliedIndex(), st.GetProtocolVersion(), st.GetIsLearner(), strings.Join(st.GetErrors(), "; "))
			})
		},
	}.run(e, cmd, format)
}

// metadataReply is a reply message that carries only its node's metadata.
type metadataReply interface{ GetMetadata() *common.Metadata }

// doneTable prints text for each node that succeeded.
func doneTable[M metadataReply](w io.Writer, msgs []M, named bool, text func(M) string) {
	header(w, named, "RESPONSE")

	for _, m := range msgs {
		if f := failureOf(m.GetMetadata()); f != nil {
			errorRow(w, f)

			continue
		}

		fmt.Fprintf(w, "%s%s\n", nodeCell(named, m.GetMetadata().GetHostname()), text(m))
	}
}

func etcdLeave(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*machine.EtcdLeaveClusterResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.EtcdLeaveClusterResponse, error) {
			return c.MachineClient.EtcdLeaveCluster(ctx, &machine.EtcdLeaveClusterRequest{})
		},
		table: func(w io.Writer, r *machine.EtcdLeaveClusterResponse, named bool) {
			doneTable(w, r.GetMessages(), named, func(*machine.EtcdLeaveCluster) string { return "left the etcd cluster" })
		},
	}.run(e, cmd, format)
}

func etcdForfeit(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*machine.EtcdForfeitLeadershipResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.EtcdForfeitLeadershipResponse, error) {
			return c.MachineClient.EtcdForfeitLeadership(ctx, &machine.EtcdForfeitLeadershipRequest{})
		},
		table: func(w io.Writer, r *machine.EtcdForfeitLeadershipResponse, named bool) {
			doneTable(w, r.GetMessages(), named, func(m *machine.EtcdForfeitLeadership) string {
				if m.GetMember() == "" {
					return "not the leader"
				}

				return "leadership moved to " + m.GetMember()
			})
		},
	}.run(e, cmd, format)
}

func etcdDefrag(e *env, cmd *cobra.Command, format outputFormat) error {
	return unaryCommand[*machine.EtcdDefragmentResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.EtcdDefragmentResponse, error) {
			return c.MachineClient.EtcdDefragment(ctx, &emptypb.Empty{})
		},
		table: func(w io.Writer, r *machine.EtcdDefragmentResponse, named bool) {
			doneTable(w, r.GetMessages(), named, func(*machine.EtcdDefragment) string { return "defragmented" })
		},
	}.run(e, cmd, format)
}

func newEtcdRemoveMemberCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove-member ID",
		Short: "Remove the etcd member of the hexadecimal ID (as etcd members shows it)",
		Example: `  aegisctl etcd members
  aegisctl etcd remove-member 8e9e05c52164694d`,
		Args: cobra.ExactArgs(1),
	}
	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseUint(args[0], 16, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("member ID %q is not a hexadecimal etcd member ID", args[0])
		}

		return unaryCommand[*machine.EtcdRemoveMemberByIDResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.EtcdRemoveMemberByIDResponse, error) {
				return c.MachineClient.EtcdRemoveMemberByID(ctx, &machine.EtcdRemoveMemberByIDRequest{MemberId: id})
			},
			table: func(w io.Writer, r *machine.EtcdRemoveMemberByIDResponse, named bool) {
				doneTable(w, r.GetMessages(), named, func(*machine.EtcdRemoveMemberByID) string {
					return fmt.Sprintf("member %016x removed", id)
				})
			},
		}.run(e, cmd, *format)
	}

	return cmd
}

func newEtcdAlarmCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "alarm", Short: "List or disarm the etcd cluster's alarms"}

	table := func(w io.Writer, named bool, md *common.Metadata, alarms []*machine.EtcdMemberAlarm) {
		if f := failureOf(md); f != nil {
			errorRow(w, f)

			return
		}

		for _, a := range alarms {
			fmt.Fprintf(w, "%s%016x\t%s\n", nodeCell(named, md.GetHostname()), a.GetMemberId(), a.GetAlarm())
		}
	}

	cmd.AddCommand(etcdUnary(e, "list", "List the alarms", func(e *env, cmd *cobra.Command, format outputFormat) error {
		return unaryCommand[*machine.EtcdAlarmListResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.EtcdAlarmListResponse, error) {
				return c.MachineClient.EtcdAlarmList(ctx, &emptypb.Empty{})
			},
			table: func(w io.Writer, r *machine.EtcdAlarmListResponse, named bool) {
				header(w, named, "MEMBER\tALARM")

				for _, m := range r.GetMessages() {
					table(w, named, m.GetMetadata(), m.GetMemberAlarms())
				}
			},
		}.run(e, cmd, format)
	}), etcdUnary(e, "disarm", "Disarm the alarms", func(e *env, cmd *cobra.Command, format outputFormat) error {
		return unaryCommand[*machine.EtcdAlarmDisarmResponse]{
			call: func(ctx context.Context, c *client.Client) (*machine.EtcdAlarmDisarmResponse, error) {
				return c.MachineClient.EtcdAlarmDisarm(ctx, &emptypb.Empty{})
			},
			table: func(w io.Writer, r *machine.EtcdAlarmDisarmResponse, named bool) {
				header(w, named, "MEMBER\tDISARMED ALARM")

				for _, m := range r.GetMessages() {
					table(w, named, m.GetMetadata(), m.GetMemberAlarms())
				}
			},
		}.run(e, cmd, format)
	}))

	return cmd
}

// etcdMembersTable shows member IDs in hex, as etcdctl does; the wide form
// adds them in decimal, as -o json prints the reply's uint64.
func etcdMembersTable(w io.Writer, r *machine.EtcdMemberListResponse, named, wide bool) {
	cols := "ID\tHOSTNAME\tPEER URLS\tCLIENT URLS\tLEARNER"
	if wide {
		cols += "\tID (DECIMAL)"
	}

	header(w, named, cols)

	eachNode(w, r.GetMessages(), func(m *machine.EtcdMembers) {
		for _, mb := range m.GetMembers() {
			fmt.Fprintf(w, "%s%016x\t%s\t%s\t%s\t%t", nodeCell(named, m.GetMetadata().GetHostname()), mb.GetId(),
				mb.GetHostname(), strings.Join(mb.GetPeerUrls(), ","), strings.Join(mb.GetClientUrls(), ","), mb.GetIsLearner())

			if wide {
				fmt.Fprintf(w, "\t%d", mb.GetId())
			}

			fmt.Fprintln(w)
		}
	})
}
