package trustd

import (
	"crypto/tls"

	"github.com/aegis-os/aegis/sanpolicy"
)

// reserved is the set no token may obtain, read fresh for each request:
// the control planes the config names and this node's own addresses and
// names, as its server certificate carries them (trustd runs on a control
// plane, so its certificate names one).
func (s *Server) reserved() *sanpolicy.Reserved {
	var hosts []string

	if s.cfg.ControlPlanes != nil {
		hosts = append(hosts, s.cfg.ControlPlanes.ControlPlaneHosts()...)
	}

	if cert, err := s.cfg.Certificate.GetCertificate(&tls.ClientHelloInfo{}); err == nil && cert != nil && cert.Leaf != nil {
		leaf := cert.Leaf
		hosts = append(hosts, leaf.Subject.CommonName)
		hosts = append(hosts, leaf.DNSNames...)

		for _, ip := range leaf.IPAddresses {
			hosts = append(hosts, ip.String())
		}
	}

	return sanpolicy.NewReserved(hosts...)
}
