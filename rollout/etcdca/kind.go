package etcdca

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout/carotation"
)

// Kind is the etcd CA's kind of rotation: cluster.etcd.ca and
// cluster.etcd.acceptedCAs of the control planes, the only nodes that
// hold it. A node restarts its etcd member itself when its etcd trust
// changes, one member of the cluster at a time, and answers the apply once
// it is healthy. The client config and the nodes' API certificates do not
// come from it.
func Kind() carotation.Kind {
	return carotation.Kind{
		Name: "etcd", ControlPlanesOnly: true, Config: Config{}, Verify: verify,
		StepNames: [3]string{
			"accept the new etcd CA on every control plane",
			"issue etcd's certificates from the new etcd CA",
			"drop the old etcd CA",
		},
	}
}

// Config is where a control plane's machine config keeps the etcd CA.
type Config struct{}

// Issuing is an empty certificate, equal to none, on a config without an
// etcd CA (etcd disabled), so that every check of it fails.
func (Config) Issuing(cfg *certs.MachineConfig) *x509.Certificate {
	if cfg.Cluster.Etcd.CA == nil {
		return &x509.Certificate{}
	}

	c, err := ca.ParseCertificate(cfg.Cluster.Etcd.CA.Crt)
	if err != nil {
		return &x509.Certificate{}
	}

	return c
}

// Accepts reads the raw fields, which an earlier edit of the same config
// may have changed since it was parsed.
func (c Config) Accepts(cfg *certs.MachineConfig, cert *x509.Certificate) bool {
	if c.Issuing(cfg).Equal(cert) {
		return true
	}

	for _, a := range cfg.Cluster.Etcd.AcceptedCAs {
		if carotation.SamePEM(a.Crt, cert) {
			return true
		}
	}

	return false
}

// Held is the etcd CA with its key.
func (Config) Held(cfg *certs.MachineConfig) *ca.CA { return cfg.EtcdCA() }

// Bundled is the bundle's etcd CA.
func (Config) Bundled(b *certs.Bundle) **certs.CertAndKey { return &b.Certs.Etcd }

// Edit applies the Rotation's edit of the change. Accept leaves a config
// that already issues from the new CA as it is: a resumed rotation past
// step 2 applies step 1 again. Drop removes e.Old, the old CA at step 3
// or the new one in a rollback. Revert has nothing to undo: only control
// planes hold the etcd CA, and a rollback is refused once one issues from
// the new CA. The edit's one error, a config without an etcd CA, is left
// for the step's check to report, naming the node.
func (c Config) Edit(cfg *certs.MachineConfig, e carotation.Edit) {
	r := Rotation{Old: e.Old, New: e.New}

	var step Step

	switch e.Change {
	case carotation.Accept:
		if c.Issuing(cfg).Equal(e.New.Cert) {
			return
		}

		step, r.Old = Accept, c.Issuing(cfg)
	case carotation.Issue:
		step = Issue
	case carotation.Drop:
		step, r.New = Drop, &ca.CA{}
	default:
		return
	}

	_ = r.Edit(cfg, step) //nolint:errcheck // see above
}

// verify checks on every control plane what its running etcd member
// loaded (its etcd-trusted-ca statuses) and the CA of its etcd
// certificates, with Rotation.Verify. A rollback leaves what a completed
// rotation from the new CA back to the old one would: only the old CA
// trusted and issuing.
func verify(ctx context.Context, v carotation.Verification) error {
	old, newCA := v.Old, v.New

	var step Step

	switch v.Step {
	case rotationstate.StepAccepted:
		step = Accept
	case rotationstate.StepIssuing:
		step = Issue
	case rotationstate.StepDone:
		step = Drop
	case rotationstate.StepRolledBack:
		step, old, newCA = Drop, newCA, old
	default:
		return fmt.Errorf("no check for step %d", v.Step)
	}

	check := Rotation{Client: v.Walker.Client(), Old: old, New: carotation.CertOnly(newCA), Now: v.Walker.Clock().Now}

	for _, m := range v.Members {
		vctx, cancel := v.Walker.Route(ctx, m)
		err := check.Verify(vctx, step)

		cancel()

		if err != nil {
			return fmt.Errorf("%s: etcd: %w", m, v.Walker.Check(nil, err))
		}
	}

	return nil
}
