package node

import (
	"testing"
	"time"

	"github.com/aegis-os/aegis/api/node"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
)

// TestUsableHeld: a held certificate is used only if it is this node's,
// of the right kind, chains to an accepted CA and is within its lifetime
// by the host clock.
func TestUsableHeld(t *testing.T) {
	now := epoch
	ours := catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))
	other := catest.NewCA(t, ca.Ed25519, now.Add(-time.Hour))
	iss := catest.NewIssuer(t, ours, now)
	otherIss := catest.NewIssuer(t, other, now)
	hosts := []string{"127.9.0.2", "cp-1"}

	pair := func(iss *ca.Issuer, profile ca.Profile, hosts []string) *node.KeyPair {
		issued, key, err := iss.IssueNewKey(ca.KeyRequest{CommonName: "cp-1", Hosts: hosts, Profile: profile, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}

		return &node.KeyPair{Crt: issued.PEM, Key: key}
	}

	server := pair(iss, ca.ProfileServer, hosts)
	impersonator := pair(iss, ca.ProfileImpersonator, nil)
	stranger := pair(otherIss, ca.ProfileServer, hosts)
	narrow := pair(iss, ca.ProfileServer, hosts[:1])

	accepted, err := ca.NewAcceptedSet(now, ours.Cert)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		kp   *node.KeyPair
		kind certKind
		now  time.Time
		ok   bool
	}{
		{"server within its lifetime", server, serverKind, now.Add(30 * time.Minute), true},
		{"impersonator within its lifetime", impersonator, impersonatorKind, now, true},
		{"none held", nil, serverKind, now, false},
		{"expired by the host clock", server, serverKind, now.Add(2 * time.Hour), false},
		{"not yet valid by the host clock", server, serverKind, now.Add(-2 * time.Hour), false},
		{"issued by a CA not accepted", stranger, serverKind, now, false},
		{"key of another certificate", &node.KeyPair{Crt: server.GetCrt(), Key: impersonator.GetKey()}, serverKind, now, false},
		{"not valid for every name of the node", narrow, serverKind, now, false},
		{"a client certificate as server", impersonator, serverKind, now, false},
		{"a server certificate as impersonator", server, impersonatorKind, now, false},
		{"garbage", &node.KeyPair{Crt: []byte("not PEM"), Key: []byte("x")}, serverKind, now, false},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := hosts
			if tt.kind.name != serverKind.name {
				want = nil
			}

			cert, err := usableHeld(tt.kp, tt.kind, tt.now, accepted, want)
			if (err == nil) != tt.ok || (tt.ok && cert == nil) {
				t.Fatalf("usableHeld = %v, %v; want usable %v", cert, err, tt.ok)
			}
		})
	}
}
