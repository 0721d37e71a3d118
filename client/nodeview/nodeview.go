// Package nodeview reads what a live view of a node shows: its machine
// stage and readiness, its services, memory, time sync, certificate expiry
// and etcd member, from the resource API and the MachineService, each part
// as a short text. Laying the parts out is the caller's. The package
// imports no server package.
package nodeview

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// Unknown is the text of a part that could not be read.
const Unknown = "?"

// Options say where the views are read from.
type Options struct {
	// Client reaches the nodes through the endpoint. Required.
	Client *client.Client
	// Clock tells how long certificates have left. nil: the system clock.
	Clock clock.Clock
}

// View is one node: its machine status, or the error that kept it from
// being read, and each other part as text (Unknown when it could not be
// read).
type View struct {
	// Node as given to Read; "" for the endpoint's own node.
	Node string
	// Err is set when the machine status could not be read; nothing else
	// is then.
	Err error
	// Stage is the machine stage, as the node names it.
	Stage string
	// Ready reports whether the node says it is ready.
	Ready bool
	// Waits are the unmet conditions, "name: reason".
	Waits []string

	Services, Memory, Time, Certs, Etcd string
}

// Reader reads views of nodes.
type Reader struct {
	opts Options
}

// New returns a Reader with opts, its defaults applied.
func New(opts Options) *Reader {
	opts.Clock = defaults.Clock(opts.Clock)

	return &Reader{opts: opts}
}

// Read reads one node (the endpoint's own when node is ""): its machine
// status first (a node that does not answer that is a view of its error),
// then the rest.
func (r *Reader) Read(ctx context.Context, node string) View {
	if node != "" {
		ctx = client.WithNode(ctx, node)
	}

	v := View{Node: node}
	c := r.opts.Client

	ms, err := safe.StateGet[*runtime.MachineStatus](ctx, c.COSI, runtime.NewMachineStatus().Metadata())
	if err != nil {
		v.Err = err

		return v
	}

	spec := ms.TypedSpec()
	v.Stage, v.Ready = spec.Stage.String(), spec.Status.Ready

	for _, cond := range spec.Status.UnmetConditions {
		v.Waits = append(v.Waits, cond.Name+": "+cond.Reason)
	}

	v.Services = r.services(ctx)
	v.Memory = r.memory(ctx)
	v.Time = r.time(ctx)
	v.Certs = r.certs(ctx)
	v.Etcd = r.etcd(ctx)

	return v
}

func (r *Reader) services(ctx context.Context) string {
	svcs, err := safe.StateListAll[*v1alpha1.Service](ctx, r.opts.Client.COSI)
	if err != nil {
		return Unknown
	}

	var down []string

	for s := range svcs.All() {
		if !s.TypedSpec().Running || !s.TypedSpec().Healthy {
			down = append(down, s.Metadata().ID())
		}
	}

	return ServicesText(svcs.Len(), down)
}

func (r *Reader) memory(ctx context.Context) string {
	resp, err := r.opts.Client.MachineClient.Memory(ctx, &emptypb.Empty{})
	if err != nil || len(resp.GetMessages()) == 0 {
		return Unknown
	}

	return MemoryText(resp.GetMessages()[0].GetMeminfo())
}

func (r *Reader) time(ctx context.Context) string {
	ntp, err := safe.StateGet[*resourcetypes.NTPStatus](ctx, r.opts.Client.COSI, resourcetypes.NewNTPStatus().Metadata())
	if err != nil {
		return Unknown
	}

	return TimeText(ntp.TypedSpec())
}

func (r *Reader) certs(ctx context.Context) string {
	list, err := safe.StateListAll[*resourcetypes.CertificateStatus](ctx, r.opts.Client.COSI)
	if err != nil {
		return Unknown
	}

	var specs []*resourcetypes.CertificateStatusSpec
	for c := range list.All() {
		specs = append(specs, c.TypedSpec())
	}

	return CertsText(specs, r.opts.Clock.Now())
}

func (r *Reader) etcd(ctx context.Context) string {
	list, err := safe.StateListAll[*etcd.Member](ctx, r.opts.Client.COSI)
	if err != nil {
		return Unknown
	}

	if list.Len() == 0 {
		return "-"
	}

	members := -1
	if resp, err := r.opts.Client.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{}); err == nil && len(resp.GetMessages()) > 0 {
		members = len(resp.GetMessages()[0].GetMembers())
	}

	return EtcdText(list.Get(0).TypedSpec().MemberID, members)
}

// ServicesText is "3/4 up (down: etcd)": total services, those not
// running and healthy named.
func ServicesText(total int, down []string) string {
	text := fmt.Sprintf("%d/%d up", total-len(down), total)
	if len(down) > 0 {
		text += " (down: " + strings.Join(down, ",") + ")"
	}

	return text
}

// MemoryText is "used/total MiB"; used is what neither free, buffers nor
// the page cache hold.
func MemoryText(mi *machine.MemInfo) string {
	return fmt.Sprintf("%d/%d MiB", UsedKiB(mi)/1024, mi.GetMemtotal()/1024)
}

// UsedKiB is memory neither free nor reclaimable at once (buffers, page
// cache), in the kernel's kB (KiB).
func UsedKiB(mi *machine.MemInfo) uint64 {
	other := mi.GetMemfree() + mi.GetBuffers() + mi.GetCached()
	if other > mi.GetMemtotal() {
		return 0
	}

	return mi.GetMemtotal() - other
}

// TimeText says whether the node's time is synced, and to what.
func TimeText(s *resourcetypes.NTPStatusSpec) string {
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

// CertsText says how long the server certificate and the first accepted
// CA to expire have left at now.
func CertsText(certs []*resourcetypes.CertificateStatusSpec, now time.Time) string {
	var server, ca time.Time

	for _, s := range certs {
		switch {
		case s.Kind == resourcetypes.CertKindServer:
			server = s.NotAfter
		case s.Kind == resourcetypes.CertKindAcceptedCA && (ca.IsZero() || s.NotAfter.Before(ca)):
			ca = s.NotAfter
		}
	}

	text := "server " + UntilText(server, now)
	if !ca.IsZero() {
		text += ", CA " + UntilText(ca, now)
	}

	return text
}

// UntilText is how long until t, short: 23h59m, 364d, EXPIRED, none.
func UntilText(t, now time.Time) string {
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

// EtcdText is "member ID of N"; members below zero leaves the count out
// (the member list could not be read).
func EtcdText(id string, members int) string {
	text := "member " + id
	if members >= 0 {
		text += fmt.Sprintf(" of %d", members)
	}

	return text
}
