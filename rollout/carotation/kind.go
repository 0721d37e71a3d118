package carotation

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout"
)

// Kind is what differs between the CAs a rotation replaces: where a
// machine config keeps the CA, how each step edits it, and which members
// hold it. The OS CA (rollout/osca) and the etcd CA (rollout/etcdca) are
// the kinds.
type Kind struct {
	// Name is the kind as --ca and the rotation record name it.
	Name string
	// ControlPlanesOnly: workers hold no such CA; the rotation changes
	// and verifies the control planes only. false: every member.
	ControlPlanesOnly bool
	// ClientFollows: the client config and the nodes' API certificates
	// come from this CA, so step 2 writes a new client config and step 3
	// re-issues every certificate first. false: neither.
	ClientFollows bool
	// StepNames name steps 1 to 3 in a plan and in progress lines; an
	// empty name is the OS CA's name of the step.
	StepNames [3]string
	// Config reads and edits the CA in a machine config.
	Config Config
	// Verify checks, after the config checks every kind gets, what the
	// running services of every member loaded, where the config in effect
	// does not tell it. nil: the config checks are enough.
	Verify func(ctx context.Context, v Verification) error
}

// Config is where a machine config keeps a kind's CA.
type Config interface {
	// Issuing is the CA a config issues from (or trusts as its own, on a
	// worker).
	Issuing(cfg *certs.MachineConfig) *x509.Certificate
	// Accepts reports whether a config accepts cert.
	Accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool
	// Held is the CA with its key as a control plane's config holds it.
	Held(cfg *certs.MachineConfig) *ca.CA
	// Bundled is where a secrets bundle keeps the CA.
	Bundled(b *certs.Bundle) **certs.CertAndKey
	// Edit changes a config as e says. Every edit is idempotent, so a
	// resumed rotation may apply a step again.
	Edit(cfg *certs.MachineConfig, e Edit)
}

// Change is what an Edit does to a config.
type Change int

// The changes.
const (
	// Accept adds New to the accepted CAs (step 1).
	Accept Change = iota + 1
	// Issue makes New the config's own CA, Old staying accepted (step 2);
	// a control plane gets New's key.
	Issue
	// Drop removes Old from the accepted CAs (step 3; in a rollback, Old
	// is the new CA).
	Drop
	// Revert undoes Issue on a worker (which holds no CA key), New staying
	// accepted: a rollback of an interrupted step 2.
	Revert
)

// Edit is one change of a config, with the CAs it is about.
type Edit struct {
	Change Change
	Old    *x509.Certificate
	New    *ca.CA
}

// Verification is what Kind.Verify checks: the members that hold the CA,
// after step (rotationstate.StepRolledBack: after a rollback).
type Verification struct {
	Walker   *rollout.Walker
	Members  []rollout.Member
	Step     int32
	Old, New *x509.Certificate
}

// StepName names a step of the kind.
func (k Kind) StepName(step int32) string {
	if step >= rotationstate.StepAccepted && step <= rotationstate.StepDone && k.StepNames[step-1] != "" {
		return k.StepNames[step-1]
	}

	return StepName(step)
}

// holds reports whether a member holds the CA.
func (k Kind) holds(m rollout.Member) bool { return !k.ControlPlanesOnly || m.ControlPlane() }

// StepName names a step of an OS CA rotation, by the number the record
// keeps.
func StepName(step int32) string {
	switch step {
	case rotationstate.StepAccepted:
		return "accept the new CA on every node"
	case rotationstate.StepIssuing:
		return "issue from the new CA, new client config"
	case rotationstate.StepDone:
		return "re-issue every certificate from the new CA, drop the old CA"
	default:
		return fmt.Sprintf("step %d", step)
	}
}

// CertOnly is a CA of which only the certificate is known.
func CertOnly(c *x509.Certificate) *ca.CA {
	return &ca.CA{Cert: c, CertPEM: ca.EncodeCertificate(c)}
}

// SamePEM reports whether a PEM certificate is cert.
func SamePEM(pemBytes []byte, cert *x509.Certificate) bool {
	c, err := ca.ParseCertificate(pemBytes)

	return err == nil && c.Equal(cert)
}
