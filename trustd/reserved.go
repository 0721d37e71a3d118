package trustd

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"sync/atomic"

	"github.com/aegis-os/aegis/sanpolicy"
)

// reservedSet is the reserved set built from one list of control planes
// and one server certificate.
type reservedSet struct {
	controlPlanes []string
	leaf          *x509.Certificate
	set           *sanpolicy.Reserved
}

// reservedCache keeps the last reservedSet: the control planes and the
// server certificate change rarely (a config change, a renewal), and each
// request only compares them with what the set was built from.
type reservedCache struct{ last atomic.Pointer[reservedSet] }

// reserved is the set no token may obtain, as of this request: the
// control planes the config names and this node's own addresses and
// names, as its server certificate carries them (trustd runs on a control
// plane, so its certificate names one). Both are read for each request;
// the set is rebuilt only when one of them changed.
func (s *Server) reserved() *sanpolicy.Reserved {
	var controlPlanes []string
	if s.cfg.ControlPlanes != nil {
		controlPlanes = s.cfg.ControlPlanes.ControlPlaneHosts()
	}

	var leaf *x509.Certificate
	if cert, err := s.cfg.Certificate.GetCertificate(&tls.ClientHelloInfo{}); err == nil && cert != nil {
		leaf = cert.Leaf
	}

	if last := s.reservedCache.last.Load(); last != nil && last.leaf == leaf && slices.Equal(last.controlPlanes, controlPlanes) {
		return last.set
	}

	hosts := slices.Clone(controlPlanes)

	if leaf != nil {
		hosts = append(hosts, leaf.Subject.CommonName)
		hosts = append(hosts, leaf.DNSNames...)

		for _, ip := range leaf.IPAddresses {
			hosts = append(hosts, ip.String())
		}
	}

	set := sanpolicy.NewReserved(hosts...)
	s.reservedCache.last.Store(&reservedSet{controlPlanes: slices.Clone(controlPlanes), leaf: leaf, set: set})

	return set
}
