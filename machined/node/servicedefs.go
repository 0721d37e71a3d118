package node

import (
	"net"
	"strconv"

	"github.com/aegis-os/aegis/internal/daemonflag"
	"github.com/aegis-os/aegis/internal/inherit"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/runner"
)

// serviceDefinitions builds apid, the certificates service and, on control
// planes, trustd. apid and trustd wait for the node's certificates, not for
// the clock: trustd serves while the clock is not synced, refusing to sign
// with FailedPrecondition, rather than refusing connections.
func (n *Node) serviceDefinitions(b *bootState) []system.Service {
	apid := n.apidService(b)
	svcs := []system.Service{apid, certService{n}}
	held := n.listenOn(apid, b, wire.APIDPort, nil)

	if n.ctr != nil {
		svcs = append(svcs, n.containerdService())
		n.confineAPID(apid)
	}

	if b.cfg.Machine.Type.IsControlPlane() {
		trustd := n.trustdService()
		svcs = append(svcs, trustd)
		held = n.listenOn(trustd, b, wire.TrustdPort, held)

		if n.ctr != nil {
			n.confineTrustd(trustd, b.cfg.EtcdCA() != nil)
		}
	}

	// A socket adopted from the machined of another version that this
	// config does not name is closed, and every one with the containerd
	// runtime.
	n.cfg.Listeners.Retain(held...)

	if e := n.etcd.member(); e != nil {
		svcs = append(svcs, etcdService{Service: e.Service(), n: n})
	}

	return svcs
}

// apidService runs apid on the listen address; it is probed on its health
// socket.
func (n *Node) apidService(b *bootState) *processService {
	return &processService{
		id: "apid", path: n.binary("apid"), log: n.logs["apid"], clock: n.clock,
		args: append([]string{
			"--node-socket", n.layout.APIDResources(), "--machined-socket", n.layout.MachinedSocket(),
			"--health-socket", n.layout.APIDHealth(),
		}, n.logArgs()...),
		moreArgs: func() []string {
			cfg := n.config.bootConfig()

			return append(metricsArgs(cfg, "apid"), nodeNameArgs(cfg)...)
		},
		// A dial of the listen address would succeed on the socket machined
		// holds with no apid serving it: the check is apid's health service
		// ("" is SERVING while apid reaches machined).
		check:      localHealthCheck(n.layout.APIDHealth()),
		env:        []string{goMemLimit(containerMemoryLimit)},
		refuse:     map[system.Action]string{system.ActionStop: "apid carries the API itself; restart it instead"},
		carriesAPI: true,
		condition:  certsPresent{store: n.store, impersonator: b.cfg.OSCA() != nil},
	}
}

// A held socket learns when the process it was given to has ended.
var _ runner.Releaser = inherit.Source{}

// listenOn adds p's listen address (the config's listen address, port)
// to its arguments. With the process runtime, it appends the address to
// held, which it returns, and p serves the
// socket machined holds for that address (Config.Listeners), inherited
// at each start as descriptor inherit.FirstFD (--listen-fd): the socket
// outlives p's restarts, the node's reboots and its switches of version,
// so that a client's connection waits in its backlog for the next p
// rather than being refused. A container binds the address itself: a
// containerd task takes no descriptor from machined.
func (n *Node) listenOn(p *processService, b *bootState, port int, held []string) []string {
	addr := net.JoinHostPort(b.cfg.Machine.ListenAddress, strconv.Itoa(port))
	p.args = append(p.args, "--listen", addr)

	if n.ctr != nil {
		return held
	}

	p.args = append(p.args, "--listen-fd", strconv.Itoa(inherit.FirstFD))
	p.files = []runner.FileSource{n.cfg.Listeners.Source(addr)}

	return append(held, addr)
}

// logArgs are machined's --log-level and --log-format, passed on to apid
// and trustd so that the node's daemons log alike.
func (n *Node) logArgs() []string {
	f := daemonflag.Flags{Level: n.cfg.LogLevel, Format: n.cfg.LogFormat}

	return f.PassOn()
}

// trustdService runs a control plane's trustd on the listen address; it
// is probed on its token socket, which serves trustd's health service too.
func (n *Node) trustdService() *processService {
	return &processService{
		id: "trustd", path: n.binary("trustd"), log: n.logs["trustd"], clock: n.clock,
		args: append([]string{
			"--node-socket", n.layout.TrustdResources(), "--state", n.cfg.State,
			"--cert-ttl", n.cfg.NodeCertTTL.String(),
		}, n.logArgs()...),
		moreArgs:  func() []string { return metricsArgs(n.config.bootConfig(), "trustd") },
		check:     localHealthCheck(n.layout.TokensSocket()),
		env:       []string{goMemLimit(trustdMemoryLimit)},
		condition: certsPresent{store: n.store},
	}
}
