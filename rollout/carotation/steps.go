package carotation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/connect"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/internal/atomicfile"
)

// start generates the new CA, of the old one's key type, keeps it in the
// 0600 key file and records the rotation. The key never goes into the
// record, a log or the output.
func (r *Rotation) start(ctx context.Context) error {
	cp, err := r.firstConfig(ctx)
	if err != nil {
		return err
	}

	old := r.kind.Config.Issuing(cp)

	kt, err := ca.KeyTypeOf(old.PublicKey)
	if err != nil {
		return fmt.Errorf("the old CA's key: %w", err)
	}

	newCA, err := ca.Generate(ca.Config{
		KeyType: kt, Organization: strings.Join(old.Subject.Organization, ","),
		CommonName: rotatedName(old.Subject.CommonName, r.w.Clock().Now().UTC().Format("20060102T150405Z")),
	})
	if err != nil {
		return err
	}

	// Recorded first: of two runs started at once, only the one whose
	// compare-and-swap wins keeps a key.
	if err = r.rec.Put(ctx, &rotation.Rotation{Ca: r.kind.Name, Step: rotationstate.StepStarted, OldCa: ca.EncodeCertificate(old), NewCa: newCA.CertPEM}); err != nil {
		return err
	}

	keyFile := append(append([]byte{}, newCA.CertPEM...), newCA.KeyPEM...)
	if err = atomicfile.Write(r.opts.KeyPath, keyFile, 0o600, atomicfile.Options{Overwrite: true, DirPerm: 0o755}); err != nil {
		return fmt.Errorf("keeping the new CA until step 2: %w (undo the recorded start with --rollback)", err)
	}

	r.w.Printf("new %s CA %s (%s), key kept in %s (mode 0600) until step 2\n", r.kind.Name, newCA.Cert.Subject, ca.Fingerprint(newCA.Cert), r.opts.KeyPath)

	return nil
}

// rotatedName is the new CA's common name: the old one's, without the
// mark of an earlier rotation, marked with when.
func rotatedName(old, when string) string {
	base, _, _ := strings.Cut(old, " rotated ")
	if base == "" {
		base = "aegis"
	}

	return base + " rotated " + when
}

// step1 adds the new CA to every node's accepted CAs.
func (r *Rotation) step1(ctx context.Context) error {
	newCA := r.recNew()

	return r.editAll(ctx, r.edit(Edit{Change: Accept, New: CertOnly(newCA)}), func(c *certs.MachineConfig) error {
		if !r.kind.Config.Accepts(c, newCA) {
			return errors.New("does not accept the new CA")
		}

		return nil
	})
}

// step2 makes the new CA the issuing one, then writes the new client
// config and checks it on every member.
func (r *Rotation) step2(ctx context.Context) error {
	newCA, err := r.loadNewCA()
	if err != nil {
		return err
	}

	if err = r.issueFromNew(ctx, newCA); err != nil {
		return err
	}

	if !r.kind.ClientFollows {
		return nil
	}

	if err = r.newClientConfig(ctx); err != nil {
		return err
	}

	r.w.Printf("wrote the new client config to %s; client configs that trust only the old CA keep working until step 3\n", r.opts.ClientConfig)

	return nil
}

// loadNewCA reads the new CA kept since the start, and checks that it is
// the one recorded.
func (r *Rotation) loadNewCA() (*ca.CA, error) {
	data, err := os.ReadFile(r.opts.KeyPath)
	if err != nil {
		return nil, fmt.Errorf("the new CA's key, kept since step 1: %w (it is kept beside the client config the rotation started with)", err)
	}

	crt, key := splitPEM(data)

	newCA, err := ca.Parse(crt, key, r.w.Clock().Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.opts.KeyPath, err)
	}

	if !newCA.Cert.Equal(r.recNew()) {
		return nil, fmt.Errorf("%s holds another CA than the rotation recorded", r.opts.KeyPath)
	}

	return newCA, nil
}

// newClientConfig has the endpoint issue a client certificate from the
// new CA with the roles of the one in use, writes it with the CA bundle
// the node gives (old and new), switches to it and calls every member.
func (r *Rotation) newClientConfig(ctx context.Context) error {
	callCtx, cancel := context.WithTimeout(ctx, r.w.CallTimeout())
	defer cancel()

	cur := r.opts.ClientCert

	issued, err := connect.IssueClientConfig(callCtx, r.w.Client().MachineClient, cur.Subject.Organization, cur.NotAfter.Sub(cur.NotBefore))
	if err != nil {
		return fmt.Errorf("issuing the new client certificate: %w", r.w.Check(nil, err))
	}

	_, ictx, err := issued.Current()
	if err != nil {
		return err
	}

	cert, err := ca.ParseCertificate(ictx.Crt)
	if err != nil || cert.CheckSignatureFrom(r.recNew()) != nil {
		return errors.New("the endpoint did not issue the client certificate from the new CA")
	}

	return r.switchClient(ctx, ictx.CA, ictx.Crt, ictx.Key)
}

// switchClient has the caller replace the credentials in use, calls with
// the new ones and checks them on every member.
func (r *Rotation) switchClient(ctx context.Context, caPEM, crt, key []byte) error {
	c, err := r.opts.SwitchClient(ctx, caPEM, crt, key)
	if err != nil {
		return err
	}

	r.w.SetClient(c)

	return r.callEveryone(ctx)
}

// step3 re-issues every node's certificates from the new CA, then drops
// the old CA everywhere and from the client config.
func (r *Rotation) step3(ctx context.Context) error {
	newCA, old := r.recNew(), r.recOld()

	if r.kind.ClientFollows {
		r.w.Printf("step 3: client configs that trust only the old CA stop working now\n")

		for _, m := range r.members {
			if err := r.reissue(ctx, m, newCA); err != nil {
				return err
			}
		}
	}

	err := r.editAll(ctx, r.edit(Edit{Change: Drop, Old: old}), func(c *certs.MachineConfig) error {
		if r.kind.Config.Accepts(c, old) || !r.kind.Config.Issuing(c).Equal(newCA) {
			return errors.New("still accepts the old CA")
		}

		return nil
	})
	if err != nil || !r.kind.ClientFollows {
		return err
	}

	return r.switchClient(ctx, ca.EncodeCertificate(newCA), nil, nil)
}
