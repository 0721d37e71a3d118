package machineapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/upgrade"
)

// fakeUpgrader records the calls and answers err.
type fakeUpgrader struct {
	ref   string
	stage bool
	err   error
}

func (f *fakeUpgrader) Upgrade(_ context.Context, ref string, stage bool, _ string) (string, error) {
	f.ref, f.stage = ref, stage

	return "v0.3.0", f.err
}

func (f *fakeUpgrader) Rollback(context.Context, string) (string, error) { return "v0.2.0", f.err }

func TestUpgradeRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *machine.UpgradeRequest
		err  error
		code codes.Code
		says string
	}{
		{"installs now", &machine.UpgradeRequest{Image: "/b.bundle", Preserve: true}, nil, codes.OK, "restarts on it now"},
		{"stages", &machine.UpgradeRequest{Image: "/b.bundle", Stage: true}, nil, codes.OK, "staged"},
		{"force", &machine.UpgradeRequest{Image: "/b.bundle", Force: true}, nil, codes.InvalidArgument, "force is not supported"},
		{"power cycle", &machine.UpgradeRequest{Image: "/b.bundle", RebootMode: machine.UpgradeRequest_POWERCYCLE}, nil, codes.InvalidArgument, "power-cycle"},
		{"no image", &machine.UpgradeRequest{}, nil, codes.InvalidArgument, "image must name"},
		{"damaged bundle", &machine.UpgradeRequest{Image: "/b"}, fmt.Errorf("wrapped: %w", bundle.ErrDigest), codes.InvalidArgument, "digest"},
		{"skew", &machine.UpgradeRequest{Image: "/b"}, fmt.Errorf("bundle: %w", version.ErrSkew), codes.FailedPrecondition, "skew"},
		{"quorum", &machine.UpgradeRequest{Image: "/b"}, fmt.Errorf("%w: not healthy: cp2", upgrade.ErrQuorum), codes.FailedPrecondition, "cp2"},
		{"lease", &machine.UpgradeRequest{Image: "/b"}, upgrade.ErrLeaseHeld, codes.FailedPrecondition, "another control plane"},
		{"trial", &machine.UpgradeRequest{Image: "/b"}, upgrade.ErrOnTrial, codes.FailedPrecondition, "trial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeUpgrader{err: tc.err}

			resp, err := New(Config{Upgrader: up}).Upgrade(context.Background(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("Upgrade: %v, want %s", err, tc.code)
			}

			msg := status.Convert(err).Message()
			if err == nil {
				msg = resp.GetMessages()[0].GetAck()

				if up.ref != tc.req.GetImage() || up.stage != tc.req.GetStage() {
					t.Fatalf("the node got %q stage=%v", up.ref, up.stage)
				}
			}

			if !strings.Contains(msg, tc.says) {
				t.Fatalf("answer %q does not say %q", msg, tc.says)
			}
		})
	}
}

func TestRollbackRequest(t *testing.T) {
	if _, err := New(Config{Upgrader: &fakeUpgrader{}}).Rollback(context.Background(), &machine.RollbackRequest{}); err != nil {
		t.Fatal(err)
	}

	_, err := New(Config{Upgrader: &fakeUpgrader{err: upgrade.ErrNoPrevious}}).Rollback(context.Background(), &machine.RollbackRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Rollback without a kept version: %v", err)
	}

	_, err = New(Config{}).Rollback(context.Background(), &machine.RollbackRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no slots") {
		t.Fatalf("Rollback on a node without slots: %v", err)
	}
}
