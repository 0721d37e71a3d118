package etcd

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/etcdtls"
	"github.com/aegis-os/aegis/renewal"
)

// The certificates of the local member, each a PEM file pair in pkiDir:
// "server" for clients, "peer" for the other members, "client" for
// machined's own calls. All three come from the etcd CA, which is all that
// the member trusts: peer and client traffic is mTLS only.
var certNames = []string{"server", "peer", "client"}

// PeerName is a DNS SAN that only the members' peer certificates carry,
// and the only one etcd's peer port admits (--peer-cert-allowed-hostname):
// the client certificate, which trustd's user also holds, comes from the
// same etcd CA and would otherwise pass for a member. The member checks it
// too on the peer it dials. The .invalid name resolves nowhere: it marks
// the role, it names no host.
const PeerName = "peer.etcd.aegis.invalid"

func (e *Etcd) certFile(name string) string { return filepath.Join(e.pkiDir(), name+".crt") }
func (e *Etcd) keyFile(name string) string  { return filepath.Join(e.pkiDir(), name+".key") }
func (e *Etcd) caFile() string              { return filepath.Join(e.pkiDir(), "ca.crt") }

// IssueCertificates writes the trusted etcd CAs and new certificates for
// the member, and returns the loops that renew each at half-life. The
// member reads its files at every handshake, so a renewal needs no restart.
func (e *Etcd) IssueCertificates() ([]func(context.Context) error, error) {
	e.pkiMu.Lock()
	defer e.pkiMu.Unlock()

	if err := e.writeTrusted(); err != nil {
		return nil, err
	}

	var loops []func(context.Context) error

	for _, name := range certNames {
		issue := func(context.Context) (*x509.Certificate, error) {
			e.pkiMu.Lock()
			defer e.pkiMu.Unlock()

			return e.issue(name)
		}

		first, err := e.issue(name)
		if err != nil {
			return nil, fmt.Errorf("etcd: issuing the %s certificate: %w", name, err)
		}

		r, err := renewal.New(renewal.Config{Current: first, Renew: issue, Clock: e.cfg.Clock, Logger: e.log})
		if err != nil {
			return nil, err
		}

		loops = append(loops, r.Run)
	}

	e.issued = true

	return loops, nil
}

// issue makes one certificate from the current etcd CA for a new key and
// writes the pair, key first; the caller holds pkiMu.
func (e *Etcd) issue(name string) (*x509.Certificate, error) {
	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: e.cfg.CA, Clock: e.cfg.Clock})
	if err != nil {
		return nil, err
	}

	var hosts []string

	switch name {
	case "server":
		// Only a peer certificate may carry PeerName, even if a node's
		// certSANs name it.
		hosts = slices.DeleteFunc(slices.Clone(e.cfg.Hosts), func(h string) bool { return h == PeerName })
	case "peer":
		hosts = append(slices.DeleteFunc(slices.Clone(e.cfg.Hosts), func(h string) bool { return h == PeerName }), PeerName)
	}

	issued, keyPEM, err := iss.IssueNewKey(ca.KeyRequest{
		CommonName: e.cfg.Name, Hosts: hosts, Profile: ca.ProfilePeer, TTL: e.cfg.CertTTL, Fallback: ca.ECDSAP256,
	})
	if err != nil {
		return nil, err
	}

	for _, f := range []struct {
		path string
		data []byte
	}{{e.keyFile(name), keyPEM}, {e.certFile(name), issued.PEM}} {
		if err := atomicfile.Write(f.path, f.data, 0o600, atomicfile.Options{Overwrite: true}); err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
	}

	if e.cfg.ShareFiles != nil {
		if err := e.cfg.ShareFiles(); err != nil {
			return nil, fmt.Errorf("etcd: sharing the %s certificate: %w", name, err)
		}
	}

	if e.cfg.OnIssue != nil {
		e.cfg.OnIssue(name, issued.PEM)
	}

	return issued.Cert, nil
}

// clientFiles are machined's client files toward etcd, which
// etcdtls reads at each handshake so that renewals and the trust of a
// rotation apply to open clients.
func (e *Etcd) clientFiles() etcdtls.Files {
	return etcdtls.Files{CA: e.caFile(), Cert: e.certFile("client"), Key: e.keyFile("client")}
}

// Certificates returns the member's certificates as its files hold them
// now, by name ("server", "peer", "client", and "ca" for the issuing etcd
// CA); a file not written yet, or unreadable, is left out. It reads the
// files, so that it follows renewals without a hook in the renewal loops.
func (e *Etcd) Certificates() map[string]*x509.Certificate {
	out := map[string]*x509.Certificate{}

	for _, name := range append(slices.Clone(certNames), "ca") {
		data, err := os.ReadFile(filepath.Join(e.pkiDir(), name+".crt"))
		if err != nil {
			continue
		}

		// ca.crt holds every trusted etcd CA, the issuing one first.
		if cs, err := ca.ParseCertificates(data); err == nil {
			out[name] = cs[0]
		}
	}

	return out
}
