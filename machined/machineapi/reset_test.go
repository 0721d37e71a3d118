package machineapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/machined/etcd"
)

func TestResetActsAfterChecks(t *testing.T) {
	c, n := startServer(t, false)

	resp, err := c.Reset(context.Background(), &machine.ResetRequest{
		Graceful: true, Reboot: true, SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: LabelEphemeral, Wipe: true}},
	})
	if err != nil {
		t.Fatal(err)
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	actor := resp.GetMessages()[0].GetActorId()
	if actor == "" || len(n.resets) != 1 || n.resets[0] != fmt.Sprint(actor, true, true) {
		t.Fatalf("resets = %v, reply actor %q", n.resets, actor)
	}
}

func TestResetRefusals(t *testing.T) {
	tests := []struct {
		name   string
		req    *machine.ResetRequest
		refuse error
		code   codes.Code
		says   string
	}{
		{"STATE is the config", &machine.ResetRequest{SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: "EPHEMERAL"}, {Label: "STATE"}}},
			nil, codes.InvalidArgument, "system_partitions_to_wipe[1]: STATE is the machine config"},
		{"unknown label", &machine.ResetRequest{SystemPartitionsToWipe: []*machine.ResetPartitionSpec{{Label: "META"}}},
			nil, codes.InvalidArgument, `unknown label "META"`},
		{"user disks mode", &machine.ResetRequest{Mode: machine.ResetRequest_USER_DISKS}, nil, codes.InvalidArgument, "no user disks"},
		{"user disks named", &machine.ResetRequest{UserDisksToWipe: []string{"/dev/sdb"}}, nil, codes.InvalidArgument, "no user disks"},
		{"quorum", &machine.ResetRequest{Graceful: true}, fmt.Errorf("%w: this is the cluster's only voting member", etcd.ErrQuorum),
			codes.FailedPrecondition, "only voting member"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, n := startServer(t, false)
			n.refuse = tt.refuse

			_, err := c.Reset(context.Background(), tt.req)
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.says) {
				t.Fatalf("Reset: %v, want %s saying %q", err, tt.code, tt.says)
			}

			n.mu.Lock()
			defer n.mu.Unlock()

			if len(n.resets) != 0 {
				t.Fatalf("refused reset acted: %v", n.resets)
			}
		})
	}
}
