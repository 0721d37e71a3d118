package localcluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

func TestCheckNetnsPrefix(t *testing.T) {
	for prefix, ok := range map[string]bool{
		"aegis-local": true, "aegis-h15net": true, "ab": true, "a1-b2": true,
		"":              false, // nothing to name by
		"a":             false,
		"aegis-h15net1": false, // 13 characters: PREFIX-63 would pass 15
		"Aegis":         false,
		"1aegis":        false,
		"aegis-":        false,
		"aegis_local":   false,
		"aegis local":   false,
	} {
		if err := CheckNetnsPrefix(prefix); (err == nil) != ok {
			t.Errorf("CheckNetnsPrefix(%q) = %v, want ok %v", prefix, err, ok)
		}
	}
}

// TestNetLayout checks the names and addresses a netns cluster is given:
// every link name within the kernel's 15 bytes at the longest prefix and
// the most nodes, the gateway the subnet's .1, the nodes from .2.
func TestNetLayout(t *testing.T) {
	prefix := strings.Repeat("a", MaxNetnsPrefix)
	cidr := netip.MustParsePrefix("10.213.7.0/24")
	nt := newNet(prefix, cidr)
	c := &Cluster{Name: "lab", Nodes: []Node{{Name: "lab-controlplane-1", Type: certs.NodeControlPlane}}}

	if nt.Gateway.String() != "10.213.7.1/24" {
		t.Errorf("gateway %s", nt.Gateway)
	}

	for _, link := range []string{nt.Bridge, nt.hostLink(0), nt.hostLink(MaxNodes - 1)} {
		if len(link) > 15 || !strings.HasPrefix(link, prefix+"-") {
			t.Errorf("link name %q: want PREFIX-… of at most 15 bytes", link)
		}
	}

	if ns := nt.namespace(c, c.Nodes[0]); ns != prefix+"-controlplane-1" {
		t.Errorf("namespace %q", ns)
	}

	if a, _ := nodeAddress(cidr, 0); a.String() != "10.213.7.2" {
		t.Errorf("first node at %s", a)
	}
}

func TestLeftoverNames(t *testing.T) {
	nss := "lab-worker-1 (id: 3)\nlab-controlplane-1\nlabx-controlplane-1\nlab\nother\n"
	links := "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n" +
		"5: lab-br: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n" +
		"6: lab-0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 master lab-br\n" +
		"7: labx-0@if2: <BROADCAST,MULTICAST> mtu 1500\n"

	got := append(prefixed(namespaceNames(nss), "lab", "netns "), prefixed(linkNames(links), "lab", "link ")...)
	want := []string{"netns lab-worker-1", "netns lab-controlplane-1", "link lab-br", "link lab-0"}

	if !slices.Equal(got, want) {
		t.Fatalf("leftovers of lab: %q, want %q", got, want)
	}
}
