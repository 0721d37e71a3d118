package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// commandExamples are the Examples of commands whose files define none,
// by command path, kept together so that they read as one consistent set:
// the addresses are those of a local cluster ('cluster create' puts the
// first control plane at 127.5.0.2), the files those 'gen' writes.
var commandExamples = map[string]string{
	"aegisctl version": `  aegisctl version                                                     # the client's and the node's builds
  aegisctl version --client                                            # the client's alone, no node asked
  aegisctl -n 127.5.0.2,127.5.0.3 version --short                      # each node's tag`,
	"aegisctl bootstrap": `  aegisctl -n 127.5.0.2 bootstrap                                      # form etcd on the first control plane
  aegisctl -n 127.5.0.2 bootstrap --recover-from db.snapshot           # start it from a snapshot instead`,
	"aegisctl cluster create": `  aegisctl cluster create                                              # 1 control plane, 2 workers on 127.5.0.0/24
  aegisctl cluster create --name lab --controlplanes 3 --workers 1 --cidr 127.6.0.0/24
  sudo aegisctl cluster create --network netns --runtime containerd    # namespaces, confined containers
  aegisctl cluster create --metrics --wait-timeout 5m                  # serve every node's metrics`,
	"aegisctl cluster destroy": `  aegisctl cluster destroy                                             # the default cluster, aegis-local
  aegisctl cluster destroy --name lab`,
	"aegisctl cluster show": `  aegisctl cluster show
  aegisctl cluster show --name lab -o yaml
  aegisctl -n "$(aegisctl cluster show --addresses)" services          # every node of the cluster`,
	"aegisctl config contexts": `  aegisctl config contexts                                             # the current one is marked *
  aegisctl --aegisconfig ./aegisconfig config contexts -o json`,
	"aegisctl config info": `  aegisctl config info                                                 # the current context's certificate and roles
  aegisctl --context lab config info -o yaml`,
	"aegisctl config renew": `  aegisctl config renew                                                # new client certificate, same roles
  aegisctl --context lab -e 127.6.0.2 config renew`,
	"aegisctl config revocations": `  aegisctl config revocations
  aegisctl -n 127.5.0.2 config revocations -o json`,
	"aegisctl dashboard": `  aegisctl dashboard                                                   # refresh every 2s until Ctrl-C
  aegisctl -n 127.5.0.2,127.5.0.3 dashboard --interval 5s --events 20
  aegisctl dashboard --once > status.txt                               # one view, no screen control codes`,
	"aegisctl etcd alarm disarm": `  aegisctl etcd alarm list                                             # what is raised
  aegisctl -n 127.5.0.2 etcd alarm disarm                              # after freeing space (etcd defrag)`,
	"aegisctl etcd alarm list": `  aegisctl -n 127.5.0.2 etcd alarm list
  aegisctl -n 127.5.0.2,127.5.0.3,127.5.0.4 etcd alarm list -o json`,
	"aegisctl etcd defrag": `  aegisctl -n 127.5.0.2 etcd defrag                                    # one member at a time: it blocks while it runs
  aegisctl -n 127.5.0.2 etcd status                                    # the DB size after`,
	"aegisctl etcd forfeit-leadership": `  aegisctl etcd status                                                 # which member leads
  aegisctl -n 127.5.0.2 etcd forfeit-leadership                        # before a reboot of the leader`,
	"aegisctl etcd leave": `  aegisctl -n 127.5.0.4 etcd leave                                     # before taking the node out
  aegisctl -n 127.5.0.2 etcd members                                   # check it is gone`,
	"aegisctl etcd members": `  aegisctl -n 127.5.0.2 etcd members                                   # IDs in hex, as etcdctl shows them
  aegisctl -n 127.5.0.2 etcd members -o json                           # the reply as it is, IDs in decimal`,
	"aegisctl etcd status": `  aegisctl -n 127.5.0.2,127.5.0.3,127.5.0.4 etcd status
  aegisctl -n 127.5.0.2 etcd status -o yaml`,
	"aegisctl events": `  aegisctl events                                                      # follow the endpoint's node until Ctrl-C
  aegisctl -n 127.5.0.2,127.5.0.3 events --tail 20
  aegisctl events --tail -1 -o json                                    # every event the node holds`,
	"aegisctl gen ca": `  aegisctl gen ca                                                      # ca.crt and ca.key, Ed25519, 10 years
  aegisctl gen ca --name pki/os-ca --common-name "Example OS CA" --key-type ecdsa-p256 --validity 43800h`,
	"aegisctl gen crt": `  aegisctl gen crt --ca ca --csr admin.csr --name admin               # client certificate, role os:admin
  aegisctl gen crt --ca ca --csr reader.csr --name reader --roles os:reader --ttl 720h
  aegisctl gen crt --ca ca --csr node-1.csr --name node-1 --profile server`,
	"aegisctl gen csr": `  aegisctl gen csr --key admin.key                                     # admin.csr, CN admin
  aegisctl gen csr --key node-1.key --cn node-1 --ip 10.0.0.5 --dns node-1.example -o node-1.csr`,
	"aegisctl gen key": `  aegisctl gen key --name admin                                        # admin.key, Ed25519, mode 0600
  aegisctl gen key --name node-1 --key-type ecdsa-p256`,
	"aegisctl gen secrets": `  aegisctl gen secrets                                                 # secrets.yaml, mode 0600
  aegisctl gen secrets --key-type ecdsa-p256 -o cluster/secrets.yaml
  aegisctl gen config lab 10.0.0.2 --with-secrets secrets.yaml`,
	"aegisctl health": `  aegisctl -n 127.5.0.2 health --control-plane-nodes 127.5.0.2 --worker-nodes 127.5.0.3,127.5.0.4
  aegisctl health --control-plane-nodes 10.0.0.2 --wait-timeout 30s -o json`,
	"aegisctl hostname": `  aegisctl hostname
  aegisctl -n "$(aegisctl cluster show --addresses)" hostname`,
	"aegisctl members certified": `  aegisctl -n 127.5.0.2 members certified                              # nodes trustd has certified
  aegisctl -n 127.5.0.2 members certified -o yaml`,
	"aegisctl memory": `  aegisctl memory
  aegisctl -n 127.5.0.2,127.5.0.3 free -o json`,
	"aegisctl shutdown": `  aegisctl -n 127.5.0.4 shutdown
  aegisctl -n 127.5.0.3,127.5.0.4 shutdown --wait --wait-timeout 2m    # print each node's stages until it is off`,
	"aegisctl token create": `  aegisctl -n 127.5.0.2 token create --ttl 1h                          # single-use, an hour
  aegisctl -n 127.5.0.2 token create --uses 10 --ttl 24h --allow-san 'worker-*.example' --allow-san 10.0.0.0/24 \
      --description "rack 4 workers"`,
	"aegisctl token list": `  aegisctl -n 127.5.0.2 token list
  aegisctl -n 127.5.0.2 token list -o json                             # uses left, expiry, allowed SANs`,
}

// setExamples gives each command of commandExamples its Example. A path
// that names no command, or a command that already has one, is a mistake
// made here and panics, so that every test of the command tree finds it.
func setExamples(root *cobra.Command) {
	for path, ex := range commandExamples {
		c := findCommand(root, path)
		if c == nil || c.Example != "" {
			panic(fmt.Sprintf("aegisctl: example for %q: no such command, or it has its own", path))
		}

		c.Example = ex
	}
}

// findCommand returns the command whose CommandPath is path, or nil.
func findCommand(c *cobra.Command, path string) *cobra.Command {
	if c.CommandPath() == path {
		return c
	}

	for _, sub := range c.Commands() {
		if f := findCommand(sub, path); f != nil {
			return f
		}
	}

	return nil
}
