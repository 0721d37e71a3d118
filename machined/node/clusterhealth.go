package node

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/grpcopt"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/clusterhealth"
)

// clusterHealth is the ClusterService of a control plane; nil members on a
// worker make it refuse.
func (n *Node) clusterHealth() *clusterhealth.Server {
	cfg := clusterhealth.Config{Prober: prober{n}, Logger: n.log, Clock: n.clock}

	if n.cfg.Machine.Machine.Type.IsControlPlane() {
		cfg.Members = n.Members()
		cfg.Etcd = func() (clusterhealth.Etcd, error) {
			if e := n.etcd.member(); e != nil {
				return e, nil
			}

			return nil, errNoEtcd
		}
	}

	return clusterhealth.New(cfg)
}

// prober reaches other nodes' apid as this control plane's apid forwards
// calls: with the node's impersonator certificate, passing os:reader, the
// least role that lists services.
type prober struct{ n *Node }

func (p prober) Probe(ctx context.Context, address string) (clusterhealth.Probe, error) {
	creds := credentials.NewTLS(&tls.Config{
		RootCAs: p.n.acceptedCAs().Pool(), ServerName: address, MinVersion: tls.VersionTLS13,
		GetClientCertificate: p.impersonator,
	})

	conn, err := grpc.NewClient(net.JoinHostPort(address, strconv.Itoa(wire.APIDPort)),
		append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, grpcopt.FixedWindows()...)...)
	if err != nil {
		return clusterhealth.Probe{}, err
	}
	defer conn.Close()

	md := metadata.MD{}
	authz.SetMetadata(md, role.NewSet(role.Reader))

	var from peer.Peer

	resp, err := machine.NewMachineServiceClient(conn).ServiceList(metadata.NewOutgoingContext(ctx, md), &emptypb.Empty{}, grpc.Peer(&from))
	if err != nil {
		return clusterhealth.Probe{}, err
	}

	out := clusterhealth.Probe{}
	if len(resp.GetMessages()) > 0 {
		out.Services = resp.GetMessages()[0].GetServices()
	}

	if info, ok := from.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		out.Certificate = info.State.PeerCertificates[0]
	}

	return out, nil
}

func (p prober) impersonator(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	res, _ := p.n.store.Current()
	if res.GetImpersonator() == nil {
		return nil, errors.New("node: no impersonator certificate")
	}

	c, err := tls.X509KeyPair(res.GetImpersonator().GetCrt(), res.GetImpersonator().GetKey())

	return &c, err
}
