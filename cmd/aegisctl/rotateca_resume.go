package main

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// catchUp applies again, to every member, the config changes of the steps
// already recorded, before a resumed rotation goes on: a node that entered
// the member list since (or that an interrupted step missed) is brought to
// where the others are. The edits are idempotent: on the others nothing
// changes. After step 2 the new CA's key comes from a control plane that
// holds it, not from the key file, which is gone by then.
func (r *rotator) catchUp(ctx context.Context) error {
	if r.rec.GetStep() >= rotationstate.StepAccepted {
		if err := r.step1(ctx); err != nil {
			return fmt.Errorf("bringing every member to step 1: %w", err)
		}
	}

	if r.rec.GetStep() < rotationstate.StepIssuing {
		return nil
	}

	cp, err := r.nodeConfig(ctx, r.members[0])
	if err != nil {
		return err
	}

	held := r.kind.held(cp)
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
func (r *rotator) rollback(ctx context.Context) error {
	newCA, old := r.recNew(), r.recOld()

	err := r.verifyAll(ctx, func(c *certs.MachineConfig) error {
		if c.Machine.Type.IsControlPlane() && r.kind.issuing(c).Equal(newCA) {
			return errNotRollbackable
		}

		return nil
	})
	if err != nil {
		return err
	}

	err = r.editAll(ctx, func(c *certs.MachineConfig) { r.kind.revert(c, old, newCA) }, func(c *certs.MachineConfig) error {
		if !r.kind.issuing(c).Equal(old) {
			return errors.New("does not issue from the old CA")
		}

		return nil
	})
	if err != nil {
		return err
	}

	err = r.editAll(ctx, func(c *certs.MachineConfig) { r.kind.drop(c, newCA) }, func(c *certs.MachineConfig) error {
		if r.kind.accepts(c, newCA) {
			return errors.New("still accepts the new CA")
		}

		return nil
	})
	if err != nil {
		return err
	}

	if err = r.kind.verify(ctx, r, rotationstate.StepRolledBack); err != nil {
		return err
	}

	if err = r.record(ctx, rotationstate.StepRolledBack); err != nil {
		return err
	}

	if err = r.dropKeyFile(); err != nil {
		return err
	}

	fmt.Fprintf(r.out, "rolled back: the cluster accepts the old %s CA only, as before\n", r.kind.name())

	return nil
}

// dropKeyFile removes the new CA's key file once step 2 is recorded: the
// control planes hold the key then, in their 0600 configs. Not before: a
// step 2 interrupted after the file went would have no key to resume with.
func (r *rotator) dropKeyFile() error {
	if err := os.Remove(r.keyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	return nil
}

// issueFromNew makes newCA the CA of every member, the old one staying
// accepted, and verifies it.
func (r *rotator) issueFromNew(ctx context.Context, newCA *ca.CA) error {
	old := r.recOld()

	return r.editAll(ctx, func(c *certs.MachineConfig) { r.kind.issueFrom(c, newCA, old) }, func(c *certs.MachineConfig) error {
		if !r.kind.issuing(c).Equal(newCA.Cert) || !r.kind.accepts(c, old) {
			return errors.New("does not issue from the new CA while accepting the old one")
		}

		return nil
	})
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
