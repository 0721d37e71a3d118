package trustd

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/sanpolicy"
)

// hostList is a fixed ControlPlanes.
type hostList []string

func (h hostList) ControlPlaneHosts() []string { return h }

// FuzzCheckCSR covers the CSR a caller sends, checked against its policy
// (its source address and the token's allowed SANs) and the control
// planes' names: any input is refused as ErrBadRequest or ErrReservedName,
// or every name the certificate would carry (DNS and IP SANs, and the
// common name) is one the caller may have and none is a control plane's.
func FuzzCheckCSR(f *testing.F) {
	policy, err := sanpolicy.Parse([]string{"node-*.example", "*.nodes.example", "10.5.0.0/24", "fd00::2"})
	if err != nil {
		f.Fatal(err)
	}

	source := netip.MustParseAddr("10.9.0.1")
	caller := sanpolicy.ForCaller(policy, source)
	s := &Server{cfg: Config{Certificate: &certs.KeyPair{}, ControlPlanes: hostList{"10.5.0.1", "cp.nodes.example:50001"}}}
	reserved := s.reserved()

	key := catest.Key(f, ca.Ed25519)
	for _, tmpl := range []*x509.CertificateRequest{
		{Subject: pkix.Name{CommonName: "node-1.example"}, DNSNames: []string{"node-1.example", "a.nodes.example"}, IPAddresses: []net.IP{net.ParseIP("10.5.0.9")}},
		{Subject: pkix.Name{CommonName: "10.5.0.7"}, IPAddresses: []net.IP{net.ParseIP("fd00::2")}},
		{Subject: pkix.Name{CommonName: "evil.example"}, DNSNames: []string{"node-1.example"}},
		{DNSNames: []string{"node-.example", "x.y.nodes.example"}},
		{Subject: pkix.Name{CommonName: "10.9.0.1"}, IPAddresses: []net.IP{net.ParseIP("10.9.0.1"), net.ParseIP("10.5.0.1")}},
		{Subject: pkix.Name{CommonName: "CP.nodes.example"}},
	} {
		f.Add(catest.CSR(f, key, tmpl))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		r := &request{s: s, source: source, grant: Grant{AllowedSANs: policy}}

		if err := r.checkCSR(data); err != nil {
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrReservedName) {
				t.Fatalf("refusal %v is neither ErrBadRequest nor ErrReservedName", err)
			}

			return
		}

		req := r.csr.Request
		if name, ok := reserved.Find(req.Subject.CommonName, req.DNSNames, req.IPAddresses); ok {
			t.Fatalf("control plane's %q accepted", name)
		}

		policy := caller
		for _, name := range req.DNSNames {
			if !policy.PermitsDNS(name) {
				t.Fatalf("DNS SAN %q accepted outside the policy", name)
			}
		}

		for _, ip := range req.IPAddresses {
			addr, ok := netip.AddrFromSlice(ip)
			if !ok || !policy.PermitsIP(addr) {
				t.Fatalf("IP SAN %s accepted outside the policy", ip)
			}
		}

		if cn := req.Subject.CommonName; cn != "" {
			addr, perr := netip.ParseAddr(cn)
			if (perr == nil && !policy.PermitsIP(addr)) || (perr != nil && !policy.PermitsDNS(cn)) {
				t.Fatalf("common name %q accepted outside the policy", cn)
			}
		}
	})
}
