package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/rotationstate"
)

// readRecord reads the recorded rotation from the endpoint's etcd.
func (r *rotator) readRecord(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(r.client().Conn()).Get(ctx, &rotation.GetRequest{Ca: r.kind.name()})
	if err == nil {
		err = failedNodes(resp)
	}

	if err != nil {
		return fmt.Errorf("reading the rotation state (the endpoint must be a control plane): %w", r.s.explain(err))
	}

	r.rec, r.rev = resp.GetMessages()[0].GetRotation(), resp.GetMessages()[0].GetRevision()

	return nil
}

// record stores that step is complete.
func (r *rotator) record(ctx context.Context, step int32) error {
	next := &rotation.Rotation{Ca: r.kind.name(), Step: step, OldCa: r.rec.GetOldCa(), NewCa: r.rec.GetNewCa()}

	return r.put(ctx, next)
}

func (r *rotator) put(ctx context.Context, next *rotation.Rotation) error {
	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(r.client().Conn()).Put(ctx, &rotation.PutRequest{Rotation: next, ExpectedRevision: r.rev})
	if err == nil {
		err = failedNodes(resp)
	}

	if err != nil {
		return fmt.Errorf("recording step %d of the rotation: %w", next.GetStep(), r.s.explain(err))
	}

	r.rec, r.rev = resp.GetMessages()[0].GetRotation(), resp.GetMessages()[0].GetRevision()

	return nil
}

func (r *rotator) recNew() *x509.Certificate { c, _ := ca.ParseCertificate(r.rec.GetNewCa()); return c }

func (r *rotator) recOld() *x509.Certificate { c, _ := ca.ParseCertificate(r.rec.GetOldCa()); return c }

// start generates the new CA, of the old one's key type, keeps it in the
// 0600 key file and records the rotation. The key never goes into the
// record, a log or the output.
func (r *rotator) start(ctx context.Context) error {
	cp, err := r.nodeConfig(ctx, r.members[0])
	if err != nil {
		return err
	}

	old := r.kind.issuing(cp)

	kt, err := ca.KeyTypeOf(old.PublicKey)
	if err != nil {
		return fmt.Errorf("the old CA's key: %w", err)
	}

	newCA, err := ca.Generate(ca.Config{
		KeyType: kt, Organization: strings.Join(old.Subject.Organization, ","),
		CommonName: rotatedName(old.Subject.CommonName, r.e.clock.Now().UTC().Format("20060102T150405Z")),
	})
	if err != nil {
		return err
	}

	// Recorded first: of two runs started at once, only the one whose
	// compare-and-swap wins keeps a key.
	if err = r.put(ctx, &rotation.Rotation{Ca: r.kind.name(), Step: rotationstate.StepStarted, OldCa: ca.EncodeCertificate(old), NewCa: newCA.CertPEM}); err != nil {
		return err
	}

	if err = writeFile(r.keyPath, append(append([]byte{}, newCA.CertPEM...), newCA.KeyPEM...), 0o600, true); err != nil {
		return fmt.Errorf("keeping the new CA until step 2: %w (undo the recorded start with --rollback)", err)
	}

	fmt.Fprintf(r.out, "new %s CA %s (%s), key kept in %s (mode 0600) until step 2\n", r.kind.name(), newCA.Cert.Subject, ca.Fingerprint(newCA.Cert), r.keyPath)

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
func (r *rotator) step1(ctx context.Context) error {
	newCA := r.recNew()

	return r.editAll(ctx, func(c *certs.MachineConfig) { r.kind.accept(c, newCA) }, func(c *certs.MachineConfig) error {
		if !r.kind.accepts(c, newCA) {
			return errors.New("does not accept the new CA")
		}

		return nil
	})
}

// step2 makes the new CA the issuing one, then writes the new client
// config and checks it on every member.
func (r *rotator) step2(ctx context.Context) error {
	newCA, err := r.loadNewCA()
	if err != nil {
		return err
	}

	if err = r.issueFromNew(ctx, newCA); err != nil {
		return err
	}

	if !r.kind.clientFollows() {
		return nil
	}

	if err = r.newClientConfig(ctx); err != nil {
		return err
	}

	fmt.Fprintf(r.out, "wrote the new client config to %s; client configs that trust only the old CA keep working until step 3\n", r.s.path)

	return nil
}

// loadNewCA reads the new CA kept since the start, and checks that it is
// the one recorded.
func (r *rotator) loadNewCA() (*ca.CA, error) {
	data, err := os.ReadFile(r.keyPath)
	if err != nil {
		return nil, fmt.Errorf("the new CA's key, kept since step 1: %w (it is kept beside the client config the rotation started with)", err)
	}

	crt, key := splitPEM(data)

	newCA, err := ca.Parse(crt, key, r.e.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.keyPath, err)
	}

	if !newCA.Cert.Equal(r.recNew()) {
		return nil, fmt.Errorf("%s holds another CA than the rotation recorded", r.keyPath)
	}

	return newCA, nil
}

// newClientConfig has the endpoint issue a client certificate from the
// new CA with the roles of the one in use, writes it with the CA bundle
// the node gives (old and new), switches to it and calls every member.
func (r *rotator) newClientConfig(ctx context.Context) error {
	callCtx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := r.client().GenerateClientConfiguration(callCtx, &machine.GenerateClientConfigurationRequest{
		Roles: r.s.cert.Subject.Organization, CrtTtl: durationpb.New(r.s.cert.NotAfter.Sub(r.s.cert.NotBefore)),
	})
	if err == nil {
		err = failedNodes(resp)
	}

	if err != nil {
		return fmt.Errorf("issuing the new client certificate: %w", r.s.explain(err))
	}

	issued, err := certs.ParseClientConfig("the issued client config", resp.GetMessages()[0].GetTalosconfig())
	if err != nil {
		return err
	}

	_, ictx, err := issued.Current()
	if err != nil {
		return err
	}

	cert, err := ca.ParseCertificate(ictx.Crt)
	if err != nil || cert.CheckSignatureFrom(r.recNew()) != nil {
		return errors.New("the endpoint did not issue the client certificate from the new CA")
	}

	return r.switchClientConfig(ctx, ictx.CA, ictx.Crt, ictx.Key)
}

// switchClientConfig replaces the credentials of the context in use,
// dials with them and checks them on every member.
func (r *rotator) switchClientConfig(ctx context.Context, caPEM, crt, key []byte) error {
	cfg, err := loadClientConfig(r.s.path)
	if err != nil {
		return err
	}

	c := cfg.Contexts[r.s.name]
	if c == nil {
		return fmt.Errorf("context %q left %s", r.s.name, r.s.path)
	}

	c.CA = caPEM
	if crt != nil {
		c.Crt, c.Key = crt, key
	}

	if err = cfg.Save(r.s.path); err != nil {
		return err
	}

	r.s.ctx = c
	if err = r.s.loadCertificate(); err != nil {
		return err
	}

	if err = r.s.dial(ctx); err != nil {
		return err
	}

	return r.callEveryone(ctx)
}

// step3 re-issues every node's certificates from the new CA, then drops
// the old CA everywhere and from the client config.
func (r *rotator) step3(ctx context.Context) error {
	newCA, old := r.recNew(), r.recOld()

	if r.kind.clientFollows() {
		fmt.Fprintln(r.out, "step 3: client configs that trust only the old CA stop working now")

		for _, m := range r.members {
			if err := r.reissue(ctx, m, newCA); err != nil {
				return err
			}
		}
	}

	err := r.editAll(ctx, func(c *certs.MachineConfig) { r.kind.drop(c, old) }, func(c *certs.MachineConfig) error {
		if r.kind.accepts(c, old) || !r.kind.issuing(c).Equal(newCA) {
			return errors.New("still accepts the old CA")
		}

		return nil
	})
	if err != nil || !r.kind.clientFollows() {
		return err
	}

	return r.switchClientConfig(ctx, ca.EncodeCertificate(newCA), nil, nil)
}

// reissue asks one member to re-issue its certificates and checks that the
// new CA issued them all.
func (r *rotator) reissue(ctx context.Context, m member, newCA *x509.Certificate) error {
	ctx, cancel := context.WithTimeout(ctx, rotateCallTimeout)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(r.client().Conn()).Reissue(client.WithNode(ctx, m.addr), &rotation.ReissueRequest{})
	if err == nil {
		err = failedNodes(resp)
	}

	if err != nil {
		return fmt.Errorf("%s: re-issuing its certificates: %w", m, r.s.explain(err))
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
