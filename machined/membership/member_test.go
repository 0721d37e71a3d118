package membership_test

import (
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/machined/membership"
)

func entry(host string, addrs ...string) *membership.Member {
	return &membership.Member{Hostname: host, Addresses: addrs, Version: "v1.0.0", Interval: durationpb.New(time.Second)}
}

func TestCheck(t *testing.T) {
	tooMany := make([]string, membership.MaxAddresses+1)
	for i := range tooMany {
		tooMany[i] = net.IPv4(10, 0, 0, byte(i+1)).String()
	}

	for _, tt := range []struct {
		name string
		m    *membership.Member
		want string // "" is valid
	}{
		{"valid", entry("node-1", "10.0.0.1", "fd00::1"), ""},
		{"nil", nil, "no entry"},
		{"hostname not DNS", entry("node_1", "10.0.0.1"), "hostname"},
		{"hostname not canonical", entry("Node-1", "10.0.0.1"), "canonical"},
		{"no address", entry("node-1"), "0 addresses"},
		{"too many addresses", entry("node-1", tooMany...), "17 addresses"},
		{"address with port", entry("node-1", "10.0.0.1:50000"), "not a canonical IP"},
		{"address not canonical", entry("node-1", "::ffff:10.0.0.1"), "not a canonical IP"},
		{"unspecified", entry("node-1", "0.0.0.0"), "not a canonical IP"},
		{"interval too short", func() *membership.Member {
			m := entry("node-1", "10.0.0.1")
			m.Interval = durationpb.New(time.Millisecond)

			return m
		}(), "interval"},
		{"version not printable", func() *membership.Member { m := entry("node-1", "10.0.0.1"); m.Version = "v1\n"; return m }(), "version"},
		{"bad CA digest", func() *membership.Member { m := entry("node-1", "10.0.0.1"); m.AcceptedCas = "xyz"; return m }(), "digest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := membership.Check(tt.m)

			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (!errors.Is(err, membership.ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}

func TestCheckOwner(t *testing.T) {
	cert := &x509.Certificate{DNSNames: []string{"Node-1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("fd00::1")}}

	if err := membership.CheckOwner(cert, entry("node-1", "10.0.0.1", "fd00::1")); err != nil {
		t.Fatalf("own name and addresses refused: %v", err)
	}

	for _, tt := range []struct {
		name, want string
		m          *membership.Member
	}{
		{"another node's address", "10.0.0.2", entry("node-1", "10.0.0.1", "10.0.0.2")},
		{"a name the certificate does not carry", "hostname cp-1", entry("cp-1", "10.0.0.1")},
	} {
		if err := membership.CheckOwner(cert, tt.m); !errors.Is(err, membership.ErrNotOwner) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrNotOwner naming %q", tt.name, err, tt.want)
		}
	}

	// Leave's entry has an address and no name.
	if err := membership.CheckOwner(cert, &membership.Member{Addresses: []string{"10.0.0.1"}}); err != nil {
		t.Errorf("an address alone: %v", err)
	}
}
