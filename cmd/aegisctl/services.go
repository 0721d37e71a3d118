package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/emptypb"
)

func newServiceCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "service [ID [status|start|stop|restart]]",
		Aliases: []string{"services"},
		Example: `  aegisctl services
  aegisctl -n 127.5.0.2,127.5.0.3 service trustd
  aegisctl -n 127.5.0.3 service apid restart
  aegisctl service trustd -o json`,
		Short: "List the services of each node, show one, or start, stop or restart it",
		Long: `Without arguments, list every service of each node: state, health and the
last event. With a service ID, show that service (status, the default action)
or start, stop or restart it. Stopping and restarting need os:operator.`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: e.completeService,
	}

	format := addOutputFlag(cmd)

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		action := "status"
		if len(args) == 2 {
			action = args[1]
		}

		u, err := serviceAction(args, action, e.clock.Now)
		if err != nil {
			return err
		}

		return u(e, cmd, *format)
	}

	return cmd
}

// serviceRun is what `service` runs.
type serviceRun = func(*env, *cobra.Command, outputFormat) error

// serviceAction picks what `service` does from its arguments.
func serviceAction(args []string, action string, now func() time.Time) (serviceRun, error) {
	if len(args) == 0 {
		return serviceList(now), nil
	}

	switch id := args[0]; action {
	case "status":
		return serviceStatus(id, now), nil
	case "start":
		return serviceStart(id), nil
	case "stop":
		return serviceStop(id), nil
	case "restart":
		return serviceRestart(id), nil
	default:
		return nil, fmt.Errorf("unknown service action %q (status, start, stop or restart)", action)
	}
}

func serviceList(now func() time.Time) serviceRun {
	return unaryCommand[*machine.ServiceListResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.ServiceListResponse, error) {
			return c.MachineClient.ServiceList(ctx, &emptypb.Empty{})
		},
		table: func(w io.Writer, resp *machine.ServiceListResponse, named bool) {
			serviceListTable(w, resp, named, now())
		},
	}.run
}

func serviceStatus(id string, now func() time.Time) serviceRun {
	return unaryCommand[*machine.ServiceListResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.ServiceListResponse, error) {
			resp, err := c.MachineClient.ServiceList(ctx, &emptypb.Empty{})

			return onlyService(resp, id), err
		},
		table: func(w io.Writer, resp *machine.ServiceListResponse, named bool) {
			serviceStatusTable(w, resp, named, now())
		},
	}.run
}

func serviceStart(id string) serviceRun {
	return unaryCommand[*machine.ServiceStartResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.ServiceStartResponse, error) {
			return c.MachineClient.ServiceStart(ctx, &machine.ServiceStartRequest{Id: id})
		},
		table: func(w io.Writer, r *machine.ServiceStartResponse, named bool) { actionTable(w, r.GetMessages(), named) },
	}.run
}

func serviceStop(id string) serviceRun {
	return unaryCommand[*machine.ServiceStopResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.ServiceStopResponse, error) {
			return c.MachineClient.ServiceStop(ctx, &machine.ServiceStopRequest{Id: id})
		},
		table: func(w io.Writer, r *machine.ServiceStopResponse, named bool) { actionTable(w, r.GetMessages(), named) },
	}.run
}

func serviceRestart(id string) serviceRun {
	return unaryCommand[*machine.ServiceRestartResponse]{
		call: func(ctx context.Context, c *client.Client) (*machine.ServiceRestartResponse, error) {
			return c.MachineClient.ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: id})
		},
		table: func(w io.Writer, r *machine.ServiceRestartResponse, named bool) {
			actionTable(w, r.GetMessages(), named)
		},
	}.run
}

// onlyService keeps service id in each node's list; a node without it
// becomes a failure of that node.
func onlyService(resp *machine.ServiceListResponse, id string) *machine.ServiceListResponse {
	for _, m := range resp.GetMessages() {
		if failureOf(m.GetMetadata()) != nil {
			continue
		}

		var keep []*machine.ServiceInfo

		for _, svc := range m.GetServices() {
			if svc.GetId() == id {
				keep = append(keep, svc)
			}
		}

		m.Services = keep

		if len(keep) == 0 {
			//nolint:staticcheck // Error is the field failures are read from.
			m.Metadata = &common.Metadata{Hostname: m.GetMetadata().GetHostname(), Error: fmt.Sprintf("no service %q", id)}
		}
	}

	return resp
}

func serviceListTable(w io.Writer, resp *machine.ServiceListResponse, named bool, now time.Time) {
	header(w, named, "SERVICE\tSTATE\tHEALTH\tLAST CHANGE\tLAST EVENT")

	eachNode(w, resp.GetMessages(), func(m *machine.ServiceList) {
		for _, svc := range m.GetServices() {
			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", nodeCell(named, m.GetMetadata().GetHostname()),
				svc.GetId(), svc.GetState(), healthText(svc), lastChange(svc, now), lastEvent(svc))
		}
	})
}

// serviceStatusTable shows one service per node, with its events, newest first.
func serviceStatusTable(w io.Writer, resp *machine.ServiceListResponse, named bool, now time.Time) {
	for _, m := range resp.GetMessages() {
		if named {
			fmt.Fprintf(w, "NODE\t%s\n", m.GetMetadata().GetHostname())
		}

		if f := failureOf(m.GetMetadata()); f != nil {
			// Without nodes named the command's error says it.
			if named {
				fmt.Fprintf(w, "ERROR\t%s\n", f.text)
			}

			continue
		}

		for _, svc := range m.GetServices() {
			fmt.Fprintf(w, "ID\t%s\nSTATE\t%s\nHEALTH\t%s\n", svc.GetId(), svc.GetState(), healthText(svc))

			if msg := svc.GetHealth().GetLastMessage(); msg != "" {
				fmt.Fprintf(w, "LAST HEALTH MESSAGE\t%s\n", msg)
			}

			label := "EVENTS"

			events := svc.GetEvents().GetEvents()
			for i := len(events) - 1; i >= 0; i-- {
				ev := events[i]
				fmt.Fprintf(w, "%s\t[%s]: %s (%s ago)\n", label, ev.GetState(), ev.GetMsg(), now.Sub(ev.GetTs().AsTime()).Round(time.Second))
				label = ""
			}
		}
	}
}

// actionReply is a reply of ServiceStart, ServiceStop or ServiceRestart.
type actionReply interface {
	GetMetadata() *common.Metadata
	GetResp() string
}

func actionTable[M actionReply](w io.Writer, msgs []M, named bool) {
	header(w, named, "RESPONSE")

	for _, m := range msgs {
		if f := failureOf(m.GetMetadata()); f != nil {
			errorRow(w, f)

			continue
		}

		fmt.Fprintf(w, "%s%s\n", nodeCell(named, m.GetMetadata().GetHostname()), m.GetResp())
	}
}

func healthText(svc *machine.ServiceInfo) string {
	switch h := svc.GetHealth(); {
	case h == nil || h.GetUnknown():
		return "?"
	case h.GetHealthy():
		return "OK"
	default:
		return "Fail"
	}
}

func lastChange(svc *machine.ServiceInfo, now time.Time) string {
	events := svc.GetEvents().GetEvents()
	if len(events) == 0 {
		return ""
	}

	return now.Sub(events[len(events)-1].GetTs().AsTime()).Round(time.Second).String() + " ago"
}

func lastEvent(svc *machine.ServiceInfo) string {
	events := svc.GetEvents().GetEvents()
	if len(events) == 0 {
		return "<none>"
	}

	return events[len(events)-1].GetMsg()
}
