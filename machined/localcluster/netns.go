package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Networks a local cluster can run on.
const (
	// NetworkLoopback puts every node on its own loopback address of the
	// caller's network namespace: no privilege needed.
	NetworkLoopback = "loopback"
	// NetworkNetns puts every node in a network namespace of its own,
	// linked by a veth pair to a bridge in the caller's namespace, so that
	// nodes talk over real interfaces and can be cut from each other. It
	// needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's ip.
	NetworkNetns = "netns"
)

// Defaults and limits of a network-namespace cluster.
const (
	// DefaultNetnsCIDR is a private test subnet, kept clear of the ranges
	// container runtimes and VPNs usually take.
	DefaultNetnsCIDR = "10.213.0.0/24"
	// MaxNetnsPrefix keeps every link name within the kernel's 15 bytes:
	// the prefix, a dash and the bridge's "br" or a node index below
	// MaxNodes.
	MaxNetnsPrefix = 12
	// nodeLink is a node's end of its veth pair, inside its namespace.
	nodeLink = "eth0"
)

// netnsPrefixPattern is what may name namespaces and links: lowercase, so
// that the names need no quoting anywhere.
var netnsPrefixPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*[a-z0-9]$`)

// Net is the network of a netns cluster, as recorded in its manifest so
// that destroy removes exactly what create made.
type Net struct {
	// Prefix starts the name of every namespace and link of the cluster,
	// followed by a dash.
	Prefix string `json:"prefix"`
	// Bridge links the nodes' veth pairs; it holds Gateway in the caller's
	// namespace, which is how the operator reaches the nodes.
	Bridge  string       `json:"bridge"`
	Gateway netip.Prefix `json:"gateway"`
}

// CheckNetnsPrefix says whether prefix can name a cluster's namespaces and links.
func CheckNetnsPrefix(prefix string) error {
	if len(prefix) > MaxNetnsPrefix || !netnsPrefixPattern.MatchString(prefix) {
		return fmt.Errorf("localcluster: netns prefix %q: want 2 to %d characters of a-z, 0-9 and '-', starting with a letter", prefix, MaxNetnsPrefix)
	}

	return nil
}

// newNet lays out the network of cidr under prefix; it creates nothing.
func newNet(prefix string, cidr netip.Prefix) *Net {
	gw := cidr.Masked().Addr().Next()

	return &Net{Prefix: prefix, Bridge: prefix + "-br", Gateway: netip.PrefixFrom(gw, cidr.Bits())}
}

// namespace is the network namespace of node n.
func (nt *Net) namespace(c *Cluster, n Node) string {
	return nt.Prefix + "-" + strings.TrimPrefix(n.Name, c.Name+"-")
}

// hostLink is the caller's end of node i's veth pair.
func (nt *Net) hostLink(i int) string { return nt.Prefix + "-" + strconv.Itoa(i) }

// ip runs iproute2's ip; the error carries its output.
func ip(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("localcluster: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}

	return string(out), nil
}

// checkNetns refuses a netns cluster that cannot be made: no ip, not
// enough privilege, leftovers of the prefix, or the subnet already in use
// here.
func checkNetns(prefix string, cidr netip.Prefix) error {
	if err := CheckNetnsPrefix(prefix); err != nil {
		return err
	}

	if os.Geteuid() != 0 {
		return errors.New("localcluster: --network netns makes network namespaces, veth pairs and a bridge: run as root")
	}

	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("localcluster: --network netns needs iproute2's ip command (apt-get install iproute2)")
	}

	if cidr.Addr().IsLoopback() || cidr.Bits() > 29 {
		return fmt.Errorf("localcluster: CIDR %s: a netns cluster needs a non-loopback subnet of /29 or wider", cidr)
	}

	names, err := Leftovers(prefix)
	if err != nil {
		return err
	}

	if len(names) > 0 {
		return fmt.Errorf("localcluster: namespaces or links named %s-… exist already (%s): another cluster uses the prefix, or one was left behind (RemoveLeftovers, or ip netns del / ip link del)",
			prefix, strings.Join(names, ", "))
	}

	out, err := ip("-o", "addr", "show", "to", cidr.Masked().String())
	if err != nil {
		return err
	}

	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("localcluster: CIDR %s is in use in this network namespace:\n%s", cidr, out)
	}

	return nil
}

// setUp makes the bridge with the gateway address, then one namespace per
// node with its veth pair, address and loopback. The manifest is saved
// before, so whatever part of it exists is removed by tearDown.
func (nt *Net) setUp(c *Cluster) error {
	steps := [][]string{
		{"link", "add", nt.Bridge, "type", "bridge"},
		{"addr", "add", nt.Gateway.String(), "dev", nt.Bridge},
		{"link", "set", nt.Bridge, "up"},
	}

	for i, n := range c.Nodes {
		ns, link := nt.namespace(c, n), nt.hostLink(i)
		addr := netip.PrefixFrom(netip.MustParseAddr(n.Address), nt.Gateway.Bits()).String()
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", link, "type", "veth", "peer", "name", nodeLink, "netns", ns},
			[]string{"link", "set", link, "master", nt.Bridge, "up"},
			[]string{"-n", ns, "addr", "add", addr, "dev", nodeLink},
			[]string{"-n", ns, "link", "set", nodeLink, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}

	for _, args := range steps {
		if _, err := ip(args...); err != nil {
			return err
		}
	}

	return nil
}

// tearDown removes every namespace and link named with the prefix.
func (nt *Net) tearDown() error { return RemoveLeftovers(nt.Prefix) }

// Leftovers lists the network namespaces and the links of this network
// namespace whose names start with prefix and a dash.
func Leftovers(prefix string) ([]string, error) {
	if prefix == "" {
		return nil, errors.New("localcluster: no netns prefix")
	}

	nss, err := ip("netns", "list")
	if err != nil {
		return nil, err
	}

	links, err := ip("-o", "link", "show")
	if err != nil {
		return nil, err
	}

	return append(prefixed(namespaceNames(nss), prefix, "netns "), prefixed(linkNames(links), prefix, "link ")...), nil
}

// namespaceNames reads the names from ip netns list: "NAME" or "NAME (id: N)".
func namespaceNames(out string) []string {
	var names []string

	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}

	return names
}

// linkNames reads the names from ip -o link show: "7: NAME@PEER: <FLAGS> …".
func linkNames(out string) []string {
	var names []string

	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names = append(names, name)
		}
	}

	return names
}

// prefixed returns, each after kind, the names that start with prefix and a dash.
func prefixed(names []string, prefix, kind string) []string {
	var out []string

	for _, n := range names {
		if strings.HasPrefix(n, prefix+"-") {
			out = append(out, kind+n)
		}
	}

	return out
}

// RemoveLeftovers deletes every network namespace and link named with
// prefix and a dash. Processes still in a namespace keep it alive until
// they end, unnamed: stop them first.
func RemoveLeftovers(prefix string) error {
	names, err := Leftovers(prefix)
	if err != nil {
		return err
	}

	var errs []error

	// Namespaces first: deleting one deletes the veth ends inside it, and
	// with them their peers here.
	for _, name := range names {
		if ns, ok := strings.CutPrefix(name, "netns "); ok {
			if _, err := ip("netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}

	for _, name := range names {
		if link, ok := strings.CutPrefix(name, "link "); ok {
			if _, err := ip("link", "del", link); err != nil && linkExists(link) {
				errs = append(errs, err)
			}
		}
	}

	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := ip("link", "show", "dev", name)

	return err == nil
}

// Partition cuts the named nodes from every other node of a netns
// cluster, both ways, by blackhole routes in the nodes' namespaces: packets
// between the two sides are dropped as on a broken link, while the
// operator (the bridge's gateway address) still reaches every node, so
// that each side can be asked how it copes. Heal ends it.
func (c *Cluster) Partition(names ...string) error {
	if c.Net == nil {
		return errors.New("localcluster: only a netns cluster can be partitioned")
	}

	cut := map[string]bool{}

	for _, name := range names {
		if _, ok := c.NodeByName(name); !ok {
			return fmt.Errorf("localcluster: no node %s", name)
		}

		cut[name] = true
	}

	for _, a := range c.Nodes {
		for _, b := range c.Nodes {
			if cut[a.Name] == cut[b.Name] {
				continue
			}

			if _, err := ip("-n", c.Net.namespace(c, a), "route", "add", "blackhole", b.Address+"/32"); err != nil {
				return err
			}
		}
	}

	return nil
}

// Heal removes every partition of a netns cluster.
func (c *Cluster) Heal() error {
	if c.Net == nil {
		return errors.New("localcluster: only a netns cluster can be partitioned")
	}

	var errs []error

	for _, n := range c.Nodes {
		if _, err := ip("-n", c.Net.namespace(c, n), "route", "flush", "type", "blackhole"); err != nil {
			errs = append(errs, err)
		}
	}

	return errors.Join(errs...)
}

// Namespace is the network namespace node n runs in; empty on loopback.
func (c *Cluster) Namespace(n Node) string {
	if c.Net == nil {
		return ""
	}

	return c.Net.namespace(c, n)
}
