package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// caKind is what a rotation changes for one kind of CA: which fields of a
// machine config hold it, and how each step edits them. Every edit is
// idempotent, so a resumed rotation may apply a step again. The OS CA and
// the etcd CA (rotateca_etcd.go) are the kinds.
type caKind interface {
	// name is the kind as --ca and the rotation record name it.
	name() string
	// issuing is the CA a config issues from (or trusts as its own, on
	// a worker).
	issuing(cfg *certs.MachineConfig) *x509.Certificate
	// accepts reports whether a config accepts cert.
	accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool
	// accept adds a CA to what a config accepts (step 1).
	accept(cfg *certs.MachineConfig, newCA *x509.Certificate)
	// issueFrom makes the new CA the config's own, the old one staying
	// accepted (step 2); key is the new CA's, given to control planes.
	issueFrom(cfg *certs.MachineConfig, newCA *ca.CA, old *x509.Certificate)
	// drop removes a CA from what a config accepts (step 3, rollback).
	drop(cfg *certs.MachineConfig, cert *x509.Certificate)
	// revert undoes issueFrom on a worker (which holds no CA key), the
	// new CA staying accepted: a rollback of an interrupted step 2.
	revert(cfg *certs.MachineConfig, old, newCA *x509.Certificate)
	// holds reports whether a member holds this CA at all: the rotation
	// changes and verifies only those.
	holds(m member) bool
	// held is the CA with its key as a control plane's config holds it.
	held(cfg *certs.MachineConfig) *ca.CA
	// bundled is where a secrets bundle keeps this CA.
	bundled(b *certs.Bundle) **certs.CertAndKey
	// clientFollows reports whether the client config and the nodes' API
	// certificates come from this CA: then step 2 writes a new client
	// config and step 3 re-issues every certificate first.
	clientFollows() bool
	// verify checks, after the edits of step (or of a rollback) and the
	// config checks every kind gets, what the running services of every
	// member loaded, where the config in effect does not tell it.
	verify(ctx context.Context, r *rotator, step int32) error
	// stepName names a step.
	stepName(step int32) string
}

// osCA is the OS CA: machine.ca and machine.acceptedCAs.
type osCA struct{}

func (osCA) name() string { return "os" }

func (osCA) issuing(cfg *certs.MachineConfig) *x509.Certificate { return cfg.CACertificate() }

func (osCA) accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool {
	return cfg.AcceptedCAs() != nil && cfg.AcceptedCAs().Contains(cert)
}

// accept reads the raw fields, not the parsed forms, which an earlier
// edit of the same config has made stale.
func (osCA) accept(cfg *certs.MachineConfig, newCA *x509.Certificate) {
	listed := slices.ContainsFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return samePEM(a.Crt, newCA) })
	if !listed && !samePEM(cfg.Machine.CA.Crt, newCA) {
		cfg.Machine.AcceptedCAs = append(cfg.Machine.AcceptedCAs, certs.CertAndKey{Crt: ca.EncodeCertificate(newCA)})
	}
}

func (osCA) issueFrom(cfg *certs.MachineConfig, newCA *ca.CA, old *x509.Certificate) {
	if samePEM(cfg.Machine.CA.Crt, newCA.Cert) {
		return
	}

	pair := certs.CertAndKey{Crt: newCA.CertPEM}
	if cfg.Machine.Type.IsControlPlane() {
		pair.Key = newCA.KeyPEM
	}

	cfg.Machine.CA = pair
	cfg.Machine.AcceptedCAs = slices.DeleteFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return samePEM(a.Crt, newCA.Cert) })
	cfg.Machine.AcceptedCAs = append(cfg.Machine.AcceptedCAs, certs.CertAndKey{Crt: ca.EncodeCertificate(old)})
}

func (k osCA) revert(cfg *certs.MachineConfig, old, newCA *x509.Certificate) {
	if cfg.Machine.Type.IsControlPlane() || !samePEM(cfg.Machine.CA.Crt, newCA) {
		return
	}

	cfg.Machine.CA = certs.CertAndKey{Crt: ca.EncodeCertificate(old)}
	k.drop(cfg, old)
	k.accept(cfg, newCA)
}

func (osCA) drop(cfg *certs.MachineConfig, cert *x509.Certificate) {
	cfg.Machine.AcceptedCAs = slices.DeleteFunc(cfg.Machine.AcceptedCAs, func(a certs.CertAndKey) bool { return samePEM(a.Crt, cert) })
}

func (osCA) holds(member) bool { return true }

func (osCA) held(cfg *certs.MachineConfig) *ca.CA { return cfg.OSCA() }

func (osCA) bundled(b *certs.Bundle) **certs.CertAndKey { return &b.Certs.OS }

func (osCA) clientFollows() bool { return true }

// verify adds nothing: the OS CA in effect is the config's, which the
// steps check, and steps 2 and 3 check the client config on every member.
func (osCA) verify(context.Context, *rotator, int32) error { return nil }

func (osCA) stepName(step int32) string { return stepName(step) }

// samePEM reports whether a PEM certificate is cert.
func samePEM(pemBytes []byte, cert *x509.Certificate) bool {
	c, err := ca.ParseCertificate(pemBytes)

	return err == nil && c.Equal(cert)
}

// caKinds returns the kinds --ca takes, by name.
func caKinds() map[string]caKind { return map[string]caKind{"os": osCA{}, "etcd": etcdCA{}} }

// rotationAction is what a run of rotate-ca does.
type rotationAction int

const (
	// actionStart starts a new rotation and runs its steps.
	actionStart rotationAction = iota
	// actionResume runs the steps left of the recorded rotation.
	actionResume
	// actionRollback undoes a rotation that has not gone past step 1.
	actionRollback
)

// stepName names a step, by the number the record keeps.
func stepName(step int32) string {
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

// errNotRollbackable refuses a rollback once the new CA issues.
var errNotRollbackable = errors.New("the new CA already issues certificates (step 2 done): a rollback would lock them out; complete the rotation with --resume")

// decide picks the action of a run from the recorded rotation (nil: none
// ever recorded) and the flags, and the first step to run.
func decide(rec *rotation.Rotation, resume, rollback bool) (rotationAction, int32, error) {
	inProgress := rotationstate.InProgress(rec)

	switch {
	case resume && rollback:
		return 0, 0, errors.New("--resume and --rollback exclude each other")
	case !inProgress && (resume || rollback):
		return 0, 0, errors.New("no rotation of this CA is in progress: nothing to resume or roll back")
	case inProgress && !resume && !rollback:
		return 0, 0, fmt.Errorf("a rotation started by %q at %s has completed step %d: complete it with --resume, or undo it with --rollback (before step 2)",
			rec.GetStartedBy(), rec.GetStartedAt().AsTime().UTC().Format("2006-01-02 15:04:05Z"), rec.GetStep())
	case rollback && rec.GetStep() >= rotationstate.StepIssuing:
		return 0, 0, errNotRollbackable
	case rollback:
		return actionRollback, rotationstate.StepRolledBack, nil
	case resume:
		return actionResume, rec.GetStep() + 1, nil
	default:
		return actionStart, rotationstate.StepAccepted, nil
	}
}

// stepsToRun are the steps from first up to until (0: all).
func stepsToRun(first, until int32) []int32 {
	if until <= 0 || until > rotationstate.StepDone {
		until = rotationstate.StepDone
	}

	var out []int32
	for s := max(first, rotationstate.StepAccepted); s <= until; s++ {
		out = append(out, s)
	}

	return out
}
