package apid

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/logkey"
)

// A call whose request holds key material goes only to a node whose proven
// role is the one the material is for: a control plane's config holds the
// cluster's CA keys, which a worker must never see, and a worker's holds the
// join token. The role comes from what proves it (target.role): a live
// membership entry, the config's control-plane endpoints, or for this node
// its own config. A node whose role nothing proves gets no secrets.

// errUnreadableSecrets refuses a secrets-carrying request whose role apid
// cannot read: it fails closed rather than send keys it cannot place.
var errUnreadableSecrets = errors.New("apid: request carrying secrets")

// secretsCall is what apid knows of one call carrying secrets: the role
// its secrets are for and what they are, for the refusal's message.
type secretsCall struct {
	role string
	what string
}

// secretsReader reads the role a request's secrets are for; nil means the
// method's secrets are for one role whatever the request says.
type secretsReader func(req []byte) (secretsCall, error)

// secretMethods are the methods whose requests hold key material. The
// Talos MachineService's ApplyConfiguration carries a whole machine config
// (CA keys on a control plane's, the join token on a worker's);
// EtcdRecover streams an etcd snapshot, which holds the token store and
// only control planes run etcd. Aegis's own services carry no keys in
// their requests (rotation states hold certificates only, token creation
// returns the secret rather than sending one).
var secretMethods = map[string]secretsReader{
	"/machine.MachineService/ApplyConfiguration": applyConfigurationSecrets,
	"/machine.MachineService/EtcdRecover":        nil,
}

// fixedSecrets are the secrets of a method whose reader is nil.
var fixedSecrets = map[string]secretsCall{
	"/machine.MachineService/EtcdRecover": {role: RoleControlPlane, what: "an etcd snapshot holding the cluster's tokens"},
}

// carriesSecrets reports whether method's requests hold key material.
func carriesSecrets(method string) bool {
	_, ok := secretMethods[method]

	return ok
}

// applyConfigurationSecrets reads machine.type from the config of an
// ApplyConfigurationRequest, decoding no more of it than that.
func applyConfigurationSecrets(req []byte) (secretsCall, error) {
	var r machine.ApplyConfigurationRequest
	if err := proto.Unmarshal(req, &r); err != nil {
		return secretsCall{}, fmt.Errorf("%w: ApplyConfiguration: the request does not decode: %w", errUnreadableSecrets, err)
	}

	var doc struct {
		Machine struct {
			Type string `yaml:"type"`
		} `yaml:"machine"`
	}

	if err := yaml.Unmarshal(r.GetData(), &doc); err != nil {
		return secretsCall{}, fmt.Errorf("%w: ApplyConfiguration: machine.type of the configuration cannot be read: %w", errUnreadableSecrets, err)
	}

	switch doc.Machine.Type {
	case "init", RoleControlPlane:
		return secretsCall{role: RoleControlPlane, what: "the configuration is for a controlplane: refused, it carries the cluster's CA keys"}, nil
	case RoleWorker:
		return secretsCall{role: RoleWorker, what: "the configuration is for a worker: refused, it carries the cluster's join token"}, nil
	default:
		return secretsCall{}, fmt.Errorf("%w: ApplyConfiguration: machine.type %q of the configuration is neither controlplane nor worker",
			errUnreadableSecrets, doc.Machine.Type)
	}
}

// wrongRoleError refuses to send secrets to a node whose proven role is
// not the one they are for.
type wrongRoleError struct {
	node string
	// role is the node's proven role, "" when nothing proves it.
	role    string
	secrets secretsCall
}

func (e *wrongRoleError) Error() string {
	who := "node " + e.node
	if e.node == "" {
		who = "this node"
	}

	if e.role == "" {
		return fmt.Sprintf("apid: %s has no proven role; %s", who, e.secrets.what)
	}

	return fmt.Sprintf("apid: %s is a %s; %s", who, e.role, e.secrets.what)
}

// checkSecrets refuses t the call's secrets unless t's proven role is the
// one they are for. A nil sc lets every call through.
func checkSecrets(sc *secretsCall, t target) error {
	if sc == nil || t.role == sc.role {
		return nil
	}

	return &wrongRoleError{node: t.name, role: t.role, secrets: *sc}
}

// msgSecretsRefused is the audit record of secrets kept from a node.
const msgSecretsRefused = "call carrying secrets refused"

// checkSecrets is checkSecrets with its audit record: one per node kept
// from the call's secrets.
func (s *Server) checkSecrets(method string, sc *secretsCall, t target) error {
	err := checkSecrets(sc, t)
	if err == nil {
		return nil
	}

	node, role := t.name, t.role
	if node == "" {
		node = "(this node)"
	}

	if role == "" {
		role = "unproven"
	}

	s.log.Warn(msgSecretsRefused, slog.String(logkey.Method, method),
		slog.String(logkey.Node, node), slog.String(logkey.NodeRole, role), slog.String(logkey.SecretsFor, sc.role))

	return err
}

// readSecrets reads, for a method carrying secrets, the role they are for.
// A method whose request must be read has its one request taken from ss
// here, before any backend is opened; the returned stream gives it back
// to whoever reads ss next. Other methods return ss and a nil call.
func readSecrets(ss grpc.ServerStream, method string) (grpc.ServerStream, *secretsCall, error) {
	read, ok := secretMethods[method]

	switch {
	case !ok:
		return ss, nil, nil
	case read == nil:
		sc := fixedSecrets[method]

		return ss, &sc, nil
	}

	f := &frame{}
	if err := ss.RecvMsg(f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%w: %s: no request", errUnreadableSecrets, method)
		}

		return nil, nil, err
	}

	sc, err := read(f.bytes())
	if err != nil {
		f.free()

		return nil, nil, err
	}

	return &replayStream{ServerStream: ss, first: f}, &sc, nil
}

// replayStream gives back the request readSecrets took, then reads on.
type replayStream struct {
	grpc.ServerStream
	first *frame
}

func (r *replayStream) RecvMsg(m any) error {
	if r.first == nil {
		return r.ServerStream.RecvMsg(m)
	}

	f, ok := m.(*frame)
	if !ok {
		return errors.New("apid: replayed request read as a typed message")
	}

	*f, r.first = *r.first, nil

	return nil
}

// release frees the request if nobody read it (the call was refused).
func (r *replayStream) release() {
	if r.first != nil {
		r.first.free()
		r.first = nil
	}
}
