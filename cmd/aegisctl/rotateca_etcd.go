package main

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/cmd/aegisctl/etcdrotation"
)

// etcdCA is the etcd CA: cluster.etcd.ca and cluster.etcd.acceptedCAs of
// the control planes, the only nodes that hold it. The edits and the
// checks of what the running members loaded are etcdrotation's; a node
// restarts its etcd member itself when its etcd trust changes, one member
// of the cluster at a time, and answers the apply once it is healthy. The
// client config and the nodes' API certificates do not come from it.
type etcdCA struct{}

func (etcdCA) name() string { return "etcd" }

// holds: workers run no etcd and hold no etcd CA.
func (etcdCA) holds(m member) bool { return m.controlPlane }

func (etcdCA) clientFollows() bool { return false }

// issuing is an empty certificate, equal to none, on a config without an
// etcd CA (etcd disabled), so that every check of it fails.
func (etcdCA) issuing(cfg *certs.MachineConfig) *x509.Certificate {
	if cfg.Cluster.Etcd.CA == nil {
		return &x509.Certificate{}
	}

	c, err := ca.ParseCertificate(cfg.Cluster.Etcd.CA.Crt)
	if err != nil {
		return &x509.Certificate{}
	}

	return c
}

// accepts reads the raw fields, which an earlier edit of the same config
// may have changed since it was parsed.
func (k etcdCA) accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool {
	if k.issuing(cfg).Equal(cert) {
		return true
	}

	for _, a := range cfg.Cluster.Etcd.AcceptedCAs {
		if samePEM(a.Crt, cert) {
			return true
		}
	}

	return false
}

// accept leaves a config that already issues from newCA as it is: a
// resumed rotation past step 2 applies step 1 again.
func (k etcdCA) accept(cfg *certs.MachineConfig, newCA *x509.Certificate) {
	if k.issuing(cfg).Equal(newCA) {
		return
	}

	k.edit(cfg, etcdrotation.Accept, k.issuing(cfg), certOnly(newCA))
}

func (k etcdCA) issueFrom(cfg *certs.MachineConfig, newCA *ca.CA, old *x509.Certificate) {
	k.edit(cfg, etcdrotation.Issue, old, newCA)
}

// drop removes cert, the old CA at step 3 or the new one in a rollback,
// from the accepted etcd CAs: etcdrotation's Drop with cert as the CA
// dropped.
func (k etcdCA) drop(cfg *certs.MachineConfig, cert *x509.Certificate) {
	k.edit(cfg, etcdrotation.Drop, cert, &ca.CA{})
}

// revert has nothing to undo: only control planes hold the etcd CA, and a
// rollback is refused once one issues from the new CA.
func (etcdCA) revert(*certs.MachineConfig, *x509.Certificate, *x509.Certificate) {}

// edit applies one of etcdrotation's edits. Its one error, a config
// without an etcd CA, is left for the step's check to report, naming the
// node.
func (etcdCA) edit(cfg *certs.MachineConfig, step etcdrotation.Step, old *x509.Certificate, newCA *ca.CA) {
	r := etcdrotation.Rotation{Old: old, New: newCA}
	_ = r.Edit(cfg, step) //nolint:errcheck // see above
}

func (etcdCA) held(cfg *certs.MachineConfig) *ca.CA { return cfg.EtcdCA() }

func (etcdCA) bundled(b *certs.Bundle) **certs.CertAndKey { return &b.Certs.Etcd }

// verify checks on every control plane what its running etcd member
// loaded (its etcd-trusted-ca statuses) and the CA of its etcd
// certificates, with etcdrotation's Verify. A rollback leaves what a
// completed rotation from the new CA back to the old one would: only the
// old CA trusted and issuing.
func (etcdCA) verify(ctx context.Context, r *rotator, step int32) error {
	old, newCA := r.recOld(), r.recNew()

	var es etcdrotation.Step

	switch step {
	case rotationstate.StepAccepted:
		es = etcdrotation.Accept
	case rotationstate.StepIssuing:
		es = etcdrotation.Issue
	case rotationstate.StepDone:
		es = etcdrotation.Drop
	case rotationstate.StepRolledBack:
		es, old, newCA = etcdrotation.Drop, newCA, old
	default:
		return fmt.Errorf("no check for step %d", step)
	}

	check := etcdrotation.Rotation{Client: r.client(), Old: old, New: certOnly(newCA), Now: r.e.clock.Now}

	for _, m := range r.members {
		vctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
		err := check.Verify(client.WithNode(vctx, m.addr), es)

		cancel()

		if err != nil {
			return fmt.Errorf("%s: etcd: %w", m, r.s.explain(err))
		}
	}

	return nil
}

func (etcdCA) stepName(step int32) string {
	switch step {
	case rotationstate.StepAccepted:
		return "accept the new etcd CA on every control plane"
	case rotationstate.StepIssuing:
		return "issue etcd's certificates from the new etcd CA"
	case rotationstate.StepDone:
		return "drop the old etcd CA"
	default:
		return stepName(step)
	}
}

// certOnly is a CA of which only the certificate is known.
func certOnly(c *x509.Certificate) *ca.CA {
	return &ca.CA{Cert: c, CertPEM: ca.EncodeCertificate(c)}
}
