package carotation

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/rollout"
)

// catchUp applies again, to every member, the config changes of the steps
// already recorded, before a resumed rotation goes on: a node that entered
// the member list since (or that an interrupted step missed) is brought to
// where the others are. The edits are idempotent: on the others nothing
// changes. After step 2 the new CA's key comes from a control plane that
// holds it, not from the key file, which is gone by then.
func (r *Rotation) catchUp(ctx context.Context) error {
	if r.rec.Get().GetStep() >= rotationstate.StepAccepted {
		if err := r.step1(ctx); err != nil {
			return fmt.Errorf("bringing every member to step 1: %w", err)
		}
	}

	if r.rec.Get().GetStep() < rotationstate.StepIssuing {
		return nil
	}

	cp, err := r.firstConfig(ctx)
	if err != nil {
		return err
	}

	held := r.kind.Config.Held(cp)
	if held == nil || !held.Cert.Equal(r.recNew()) {
		return fmt.Errorf("%s does not hold the new CA although step 2 is recorded", r.members[0])
	}

	if err = r.issueFromNew(ctx, held); err != nil {
		return fmt.Errorf("bringing every member to step 2: %w", err)
	}

	return nil
}

// rollback drops the new CA from every node. Workers that an interrupted
// step 2 left issuing from it go back to the old CA first; a control plane
// left so holds only the new CA's key, and the rotation must be completed.
func (r *Rotation) rollback(ctx context.Context) error {
	newCA, old := r.recNew(), r.recOld()
	cfg := r.kind.Config

	if err := r.refuseIssuingControlPlanes(ctx, newCA); err != nil {
		return err
	}

	err := r.editAll(ctx, r.edit(Edit{Change: Revert, Old: old, New: CertOnly(newCA)}), func(c *certs.MachineConfig) error {
		if !cfg.Issuing(c).Equal(old) {
			return errors.New("does not issue from the old CA")
		}

		return nil
	})
	if err != nil {
		return err
	}

	err = r.editAll(ctx, r.edit(Edit{Change: Drop, Old: newCA}), func(c *certs.MachineConfig) error {
		if cfg.Accepts(c, newCA) {
			return errors.New("still accepts the new CA")
		}

		return nil
	})
	if err != nil {
		return err
	}

	if err = r.verify(ctx, rotationstate.StepRolledBack); err != nil {
		return err
	}

	if err = r.rec.Step(ctx, rotationstate.StepRolledBack); err != nil {
		return err
	}

	if err = r.dropKeyFile(); err != nil {
		return err
	}

	r.w.Printf("rolled back: the cluster accepts the old %s CA only, as before\n", r.kind.Name)

	return nil
}

// refuseIssuingControlPlanes refuses a rollback once a control plane
// issues from the new CA.
func (r *Rotation) refuseIssuingControlPlanes(ctx context.Context, newCA *x509.Certificate) error {
	return r.w.VerifyAll(ctx, r.members, func(c *certs.MachineConfig) error {
		if c.Machine.Type.IsControlPlane() && r.kind.Config.Issuing(c).Equal(newCA) {
			return ErrNotRollbackable
		}

		return nil
	})
}

// dropKeyFile removes the new CA's key file once step 2 is recorded: the
// control planes hold the key then, in their 0600 configs. Not before: a
// step 2 interrupted after the file went would have no key to resume with.
func (r *Rotation) dropKeyFile() error {
	if err := os.Remove(r.opts.KeyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	return nil
}

// issueFromNew makes newCA the CA of every member, the old one staying
// accepted, and verifies it.
func (r *Rotation) issueFromNew(ctx context.Context, newCA *ca.CA) error {
	old := r.recOld()

	return r.editAll(ctx, r.edit(Edit{Change: Issue, Old: old, New: newCA}), func(c *certs.MachineConfig) error {
		if !r.kind.Config.Issuing(c).Equal(newCA.Cert) || !r.kind.Config.Accepts(c, old) {
			return errors.New("does not issue from the new CA while accepting the old one")
		}

		return nil
	})
}

// reissue asks one member to re-issue its certificates and checks that the
// new CA issued them all.
func (r *Rotation) reissue(ctx context.Context, m rollout.Member, newCA *x509.Certificate) error {
	cctx, cancel := r.w.Route(ctx, m)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(r.w.Client().Conn()).Reissue(cctx, &rotation.ReissueRequest{})
	if err = r.w.Check(resp, err); err != nil {
		return fmt.Errorf("%s: re-issuing its certificates: %w", m, err)
	}

	for _, msg := range resp.GetMessages() {
		for _, c := range msg.GetCertificates() {
			cert, err := ca.ParseCertificate(c.GetCrt())
			if err != nil || cert.CheckSignatureFrom(newCA) != nil {
				return fmt.Errorf("%s: its %s certificate is not from the new CA", m, c.GetKind())
			}
		}
	}

	return nil
}

// splitPEM separates the certificate blocks of a key file from the others
// (its key).
func splitPEM(data []byte) (crt, key []byte) {
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			return crt, key
		}

		if block.Type == "CERTIFICATE" {
			crt = append(crt, pem.EncodeToMemory(block)...)
		} else {
			key = append(key, pem.EncodeToMemory(block)...)
		}

		data = rest
	}
}
