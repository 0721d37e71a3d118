package certs

import (
	"crypto/x509"
	"slices"
	"strings"
)

// The etcd CA rotates in three applies on every control plane, like the OS
// CA: accept the new CA (cluster.etcd.acceptedCAs), issue from it
// (cluster.etcd.ca, the old one moving to acceptedCAs), drop the old one.
// etcd reads the CAs it trusts only when it starts, so a change of the
// trusted set restarts the member; a change of the issuing CA re-issues its
// certificates, which etcd reads at each handshake.

// etcdCAPath is the field of the issuing etcd CA.
const etcdCAPath = "cluster.etcd.ca"

// IsEtcdCAField reports whether path is cluster.etcd.ca or one of its
// fields: an identity field that CheckEtcdCAChange may let through.
func IsEtcdCAField(path string) bool {
	return path == etcdCAPath || strings.HasPrefix(path, etcdCAPath+".")
}

// CheckEtcdCAChange allows a change of the issuing etcd CA from old to
// updated only as the second step of a rotation: the new CA is already
// trusted by old (its CA or accepted CAs), so every member and client
// already accepts the certificates it issues, and the old CA is still
// trusted by updated, so the certificates it issued keep working until the
// last step drops it. An outright swap is refused, naming the field. A
// config whose etcd CA does not change passes.
func CheckEtcdCAChange(old, updated *MachineConfig) error {
	before, after := old.EtcdCA(), updated.EtcdCA()
	if before == nil || after == nil || before.Cert.Equal(after.Cert) {
		return nil
	}

	var ps problems

	if !slices.ContainsFunc(old.EtcdTrustedCAs(), after.Cert.Equal) {
		ps.add(etcdCAPath, "the new etcd CA is not trusted yet: add it to cluster.etcd.acceptedCAs of every control plane first")
	}

	if !slices.ContainsFunc(updated.EtcdTrustedCAs(), before.Cert.Equal) {
		ps.add(etcdCAPath, "the previous etcd CA must stay in cluster.etcd.acceptedCAs while certificates it issued are in use")
	}

	return ps.err("the new machine config")
}

// EtcdPKIChange is what a new config changes of a running member's PKI.
type EtcdPKIChange struct {
	// Trust: the set of trusted etcd CAs changed; the member must restart
	// to load it (its clients re-read it at each handshake).
	Trust bool
	// Issuer: the issuing etcd CA changed; the member's certificates are
	// re-issued, which it picks up at its next handshake.
	Issuer bool
}

// Any reports whether anything changed.
func (c EtcdPKIChange) Any() bool { return c.Trust || c.Issuer }

// EtcdPKIChanges compares the etcd PKI of two configs: the trusted CAs as a
// set (their order does not matter to etcd) and the issuing CA.
func EtcdPKIChanges(old, updated *MachineConfig) EtcdPKIChange {
	var c EtcdPKIChange

	a, b := old.EtcdTrustedCAs(), updated.EtcdTrustedCAs()
	c.Trust = !sameCertSet(a, b)

	if old.EtcdCA() != nil && updated.EtcdCA() != nil {
		c.Issuer = !old.EtcdCA().Cert.Equal(updated.EtcdCA().Cert)
	}

	return c
}

// sameCertSet compares two lists without duplicates as sets.
func sameCertSet(a, b []*x509.Certificate) bool {
	missing := func(c *x509.Certificate) bool { return !slices.ContainsFunc(b, c.Equal) }

	return len(a) == len(b) && !slices.ContainsFunc(a, missing)
}
