package upgrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/client/health"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/rollout"
)

// UploadFunc uploads the bundle at path to the member ctx is routed to
// (`node` metadata) through c, and returns the reference the member's
// Upgrade call names it by.
type UploadFunc func(ctx context.Context, c *client.Client, path string) (ref string, err error)

// ErrNoUpload refuses to deliver a bundle when no UploadFunc is given:
// an upgrade never goes on as if a member had the bundle.
var ErrNoUpload = errors.New("upgrade: no way to upload a release bundle to a node was given")

// Remote is the Cluster reached through a Walker's endpoint, each member
// by `node` metadata: the members as the Walker lists them, versions from
// MachineService.Version, health from ServiceList (and EtcdStatus on
// control planes), rollbacks from the UpgradeStatus resource, upgrades
// with MachineService.Upgrade.
type Remote struct {
	// Walker calls the members. Required.
	Walker *rollout.Walker
	// Upload uploads a bundle. nil: Deliver fails with ErrNoUpload.
	Upload UploadFunc
}

// Members lists every member, refusing a node with a live certificate of
// the cluster that is not listed (rollout.Walker.Members).
func (r *Remote) Members(ctx context.Context) ([]rollout.Member, error) {
	return r.Walker.Members(ctx, nil, nil)
}

// Version is the Aegis version in the tag m reports to Talos clients.
func (r *Remote) Version(ctx context.Context, m rollout.Member) (string, error) {
	cctx, cancel := r.Walker.Route(ctx, m)
	defer cancel()

	resp, err := r.Walker.Client().Version(cctx)
	if err = r.Walker.Check(resp, err); err != nil {
		return "", err
	}

	if len(resp.GetMessages()) != 1 {
		return "", fmt.Errorf("expected the version of one node, got %d", len(resp.GetMessages()))
	}

	tag := resp.GetMessages()[0].GetVersion().GetTag()

	v, _, ok := version.FromTalosTag(tag)
	if !ok {
		return "", fmt.Errorf("it reports the version %q, which names no Aegis version (a node of an Aegis too old to upgrade this way)", tag)
	}

	return v, nil
}

// Healthy is nil when every service of m is running and healthy, a
// control plane runs trustd and etcd, and its etcd member reports no
// errors and is a voter.
func (r *Remote) Healthy(ctx context.Context, m rollout.Member) error {
	cctx, cancel := r.Walker.Route(ctx, m)
	defer cancel()

	resp, err := r.Walker.Client().MachineClient.ServiceList(cctx, &emptypb.Empty{})
	if err = r.Walker.Check(resp, err); err != nil {
		return err
	}

	if len(resp.GetMessages()) != 1 {
		return fmt.Errorf("expected the services of one node, got %d", len(resp.GetMessages()))
	}

	services := resp.GetMessages()[0].GetServices()
	if p := health.ServiceProblems(services, m.ControlPlane()); p != "" {
		return errors.New(p)
	}

	if !m.ControlPlane() {
		return nil
	}

	return r.etcdHealthy(ctx, m, services)
}

// etcdHealthy checks a control plane's etcd member.
func (r *Remote) etcdHealthy(ctx context.Context, m rollout.Member, services []*machine.ServiceInfo) error {
	runsEtcd := false
	for _, s := range services {
		runsEtcd = runsEtcd || s.GetId() == "etcd"
	}

	if !runsEtcd {
		return errors.New("etcd is not running")
	}

	cctx, cancel := r.Walker.Route(ctx, m)
	defer cancel()

	resp, err := r.Walker.Client().MachineClient.EtcdStatus(cctx, &emptypb.Empty{})
	if err = r.Walker.Check(resp, err); err != nil {
		return fmt.Errorf("etcd status: %w", err)
	}

	for _, msg := range resp.GetMessages() {
		st := msg.GetMemberStatus()

		switch {
		case len(st.GetErrors()) > 0:
			return fmt.Errorf("etcd reports errors: %v", st.GetErrors())
		case st.GetIsLearner():
			return errors.New("etcd is a learner, not promoted yet")
		}
	}

	return nil
}

// LastRollback reads m's UpgradeStatus through the resource API.
func (r *Remote) LastRollback(ctx context.Context, m rollout.Member) (resourcetypes.UpgradeRollback, error) {
	cctx, cancel := r.Walker.Route(ctx, m)
	defer cancel()

	st, err := safe.StateGet[*resourcetypes.UpgradeStatus](cctx, r.Walker.Client().COSI, resourcetypes.NewUpgradeStatus().Metadata())
	if err != nil {
		return resourcetypes.UpgradeRollback{}, fmt.Errorf("reading its upgrade status: %w", err)
	}

	return st.TypedSpec().LastRollback, nil
}

// Deliver uploads the bundle at path to m with Upload.
func (r *Remote) Deliver(ctx context.Context, m rollout.Member, path string) (string, error) {
	if r.Upload == nil {
		return "", ErrNoUpload
	}

	// Not the Walker's call timeout: an upload takes longer, and the
	// caller bounds it.
	ref, err := r.Upload(client.WithNode(ctx, m.Addr), r.Walker.Client(), path)
	if err != nil {
		return "", r.Walker.Check(nil, err)
	}

	return ref, nil
}

// Upgrade calls MachineService.Upgrade on m with ref as the image; the
// node's state is preserved.
func (r *Remote) Upgrade(ctx context.Context, m rollout.Member, ref string) error {
	cctx, cancel := r.Walker.Route(ctx, m)
	defer cancel()

	resp, err := r.Walker.Client().MachineClient.Upgrade(cctx, &machine.UpgradeRequest{Image: ref, Preserve: true})
	if checked := r.Walker.Check(resp, err); checked != nil {
		if refusal(status.Code(err)) {
			return fmt.Errorf("%w: %w", ErrNotStarted, checked)
		}

		return checked
	}

	return nil
}

// refusal reports whether a call that failed with code was answered with
// a verdict, and so did nothing; a code of transport or of an internal
// failure leaves it unknown what the node did.
func refusal(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied, codes.FailedPrecondition,
		codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated, codes.ResourceExhausted:
		return true
	default:
		return false
	}
}
