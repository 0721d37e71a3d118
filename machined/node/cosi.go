package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/resourceapi"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/timesync"
)

// etcdStatusTimeout bounds the query of the local etcd member's ID after a
// change of the etcd service.
const etcdStatusTimeout = 10 * time.Second

// etcdMemberRetry is how long after a failed query of the local member's
// ID it is asked again while etcd runs.
const etcdMemberRetry = time.Second

// The node's resources (resourceapi) follow its state where that state
// changes: the machine status where the node publishes it (machineStatus),
// the time status where the time service measures (followTime), the
// installed versions where the node records them (saveSlots), the
// services at every change the service manager announces, and the
// hostname, addresses and certificates at every change of the resources
// store. Nothing polls and nothing keeps a second copy to drift.

// followResources keeps the resources that follow the store and the
// services, on wg, until ctx ends.
func (n *Node) followResources(ctx context.Context, wg *sync.WaitGroup) {
	etcdRunning := make(chan bool, 1)

	n.setSecurityState()
	n.setUpgradeStatus()

	wg.Go(func() { n.followStore(ctx) })
	wg.Go(func() { n.followServices(ctx, etcdRunning) })
	wg.Go(func() { n.followEtcd(ctx, etcdRunning, n.setEtcdMember) })
}

// followStore sets the identity and certificate resources at every change
// of the resources store.
func (n *Node) followStore(ctx context.Context) {
	for {
		res, changed := n.store.Current()

		n.resourceErr("identity", n.res.SetIdentity(res.GetHostname(), res.GetAddresses()))
		n.certRes.refresh()

		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// followServices sets the Services resources at every change of a
// service's state or health, and tells followEtcd when etcd starts or
// stops running.
func (n *Node) followServices(ctx context.Context, etcdRunning chan bool) {
	etcdState := system.State(-1)

	for {
		changed := n.services.Changed()
		list := n.services.List()

		svcs := make([]resourceapi.ServiceState, 0, len(list))

		for _, info := range list {
			svcs = append(svcs, resourceapi.ServiceState{
				ID: info.ID, Running: info.State == system.StateRunning,
				Healthy: info.Up(), Unknown: info.HasHealth && info.Health.Unknown,
			})

			if info.ID == etcd.ServiceID && info.State != etcdState {
				etcdState = info.State
				latest(etcdRunning, info.State == system.StateRunning)
			}
		}

		n.resourceErr("services", n.res.SetServices(svcs))
		n.status.refresh()

		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// latest puts v in ch, a channel of one, replacing a value not yet taken.
func latest[T any](ch chan T, v T) {
	select {
	case <-ch:
	default:
	}

	ch <- v
}

// followEtcd sets the etcd member (with set: setEtcdMember) at each change
// followServices reports, away from the services loop: asking etcd may
// take a while. A query that
// fails while etcd runs (it has only just started listening, or is busy)
// is asked again every etcdMemberRetry until it answers or etcd stops, so
// that one failure does not leave the member unknown until etcd's next
// restart.
func (n *Node) followEtcd(ctx context.Context, running <-chan bool, set func(context.Context, bool) bool) {
	var (
		last  bool
		retry clock.Timer
	)

	for {
		var again <-chan time.Time
		if retry != nil {
			again = retry.C()
		}

		select {
		case last = <-running:
			if retry != nil {
				retry.Stop()
			}
		case <-again:
		case <-ctx.Done():
			return
		}

		retry = nil
		if !set(ctx, last) && ctx.Err() == nil {
			retry = n.clock.NewTimer(etcdMemberRetry)
		}
	}
}

// setEtcdMember sets the local member's ID while etcd runs, and removes it
// when etcd does not; it reports false when etcd runs but did not say.
func (n *Node) setEtcdMember(ctx context.Context, running bool) bool {
	e := n.etcd.member()
	if !running || e == nil {
		n.resourceErr("etcd member", n.res.SetEtcdMember(0, false))

		return true
	}

	ctx, cancel := context.WithTimeout(ctx, etcdStatusTimeout)
	defer cancel()

	st, err := e.Status(ctx)
	if err != nil {
		n.log.Warn("etcd member not known; asking again shortly", slog.String(logkey.Error, err.Error()))

		return false
	}

	n.resourceErr("etcd member", n.res.SetEtcdMember(st.GetMemberId(), true))

	return true
}

// setTime mirrors the time service's status in the resources.
func (n *Node) setTime(svc *timesync.Service) {
	st := svc.Status()
	spec := resourcetypes.NTPStatusSpec{
		Synced: svc.Synced(), TrustHostClock: svc.TrustHostClock(), Server: st.Server, Offset: st.Offset, RTT: st.RTT,
		Checked: st.Checked, Servers: svc.Servers(),
	}

	if st.LastError != nil {
		spec.Error = st.LastError.Error()
	}

	n.resourceErr("time status", n.res.SetTime(spec))
}

// setMachineConfig serves the config in effect, redacted (in Aegis's form
// and in its Talos view).
func (n *Node) setMachineConfig(cfg *certs.MachineConfig) {
	n.resourceErr("machine config", n.res.SetMachineConfig(cfg))
}

// versioner is the node's Version API.
type versioner interface {
	Version(context.Context, *emptypb.Empty) (*machine.VersionResponse, error)
}

// setVersion serves in Versions and PlatformMetadatas what the node's
// Version API answers (its tag, its platform), so that the two never
// differ: Talos's tests compare them.
func (n *Node) setVersion(api versioner) {
	resp, err := api.Version(context.Background(), &emptypb.Empty{})
	if err == nil && len(resp.GetMessages()) != 1 {
		err = fmt.Errorf("node: Version answered %d messages", len(resp.GetMessages()))
	}

	if err == nil {
		m := resp.GetMessages()[0]
		err = n.res.SetVersion(m.GetVersion().GetTag(), m.GetPlatform().GetName())
	}

	n.resourceErr("version", err)
}

// setSecurityState serves what the node reports of its security: the
// kernel's, read from the host's root.
func (n *Node) setSecurityState() {
	n.resourceErr("security state", n.res.SetSecurityState(resourceapi.ReadSecurityState(os.DirFS("/"))))
}

func (d deps) resourceErr(what string, err error) {
	if err != nil {
		d.log.Error("resource not updated", slog.String(logkey.Resource, what), slog.String(logkey.Error, err.Error()))
	}
}
