// Package etcdca drives the three steps of an etcd CA rotation over
// the API, through one endpoint, on every control plane in turn: accept
// the new etcd CA, issue from it, drop the old one. Each step is an
// ApplyConfiguration (mode no-reboot) of the node's own config with the
// step's edit, sent to one node at a time (`node` metadata): the node
// restarts its etcd member itself when its trust changes, one member of
// the cluster at a time, and answers once the member is healthy again.
// Each step is then verified on every control plane from what its running
// member loaded and from the certificates it holds (the node's
// CertificateStatuses), not from the config on disk. Kind is the etcd CA
// as carotation's rotation, resumable and recorded, drives it.
package etcdca

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/api/machineconfig"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
)

// Step is one step of the rotation.
type Step int

// The steps, in order.
const (
	// Accept adds the new etcd CA to cluster.etcd.acceptedCAs: every
	// member and etcd client trusts both CAs.
	Accept Step = iota + 1
	// Issue makes the new CA cluster.etcd.ca, the old one accepted: etcd's
	// certificates are re-issued from the new CA.
	Issue
	// Drop removes the old CA: only the new one is trusted.
	Drop
)

func (s Step) String() string {
	switch s {
	case Accept:
		return "accept the new etcd CA"
	case Issue:
		return "issue from the new etcd CA"
	case Drop:
		return "drop the old etcd CA"
	default:
		return fmt.Sprintf("step %d", int(s))
	}
}

// Rotation is an etcd CA rotation of a cluster's control planes.
type Rotation struct {
	// Client reaches every control plane through its endpoint.
	Client *client.Client
	// Nodes are the control planes (addresses or names as `node` metadata
	// takes them), in the order they apply each step.
	Nodes []string
	// Old is the etcd CA certificate being replaced.
	Old *x509.Certificate
	// New is the new etcd CA, with its key.
	New *ca.CA
	// Now is the time configs are validated at; nil means time.Now.
	Now func() time.Time
}

// NodeReport is how one node applied a step.
type NodeReport struct {
	Node string
	// Took is the ApplyConfiguration call, the restart of the member
	// included.
	Took time.Duration
	// Details is the node's answer.
	Details string
}

// Run applies step to every node in turn, then verifies it on every node.
// It stops at the first node that fails, naming it: the nodes before it
// have applied the step, the ones after have not, and running the step
// again goes on from there (a step already applied changes nothing).
func (r *Rotation) Run(ctx context.Context, step Step) ([]NodeReport, error) {
	reports := make([]NodeReport, 0, len(r.Nodes))

	for _, node := range r.Nodes {
		start := time.Now()

		details, err := r.apply(client.WithNode(ctx, node), step)
		if err != nil {
			return reports, fmt.Errorf("etcdca: %s on %s: %w", step, node, err)
		}

		reports = append(reports, NodeReport{Node: node, Took: time.Since(start), Details: details})
	}

	for _, node := range r.Nodes {
		if err := r.Verify(client.WithNode(ctx, node), step); err != nil {
			return reports, fmt.Errorf("etcdca: %s not in effect on %s: %w", step, node, err)
		}
	}

	return reports, nil
}

// apply edits the node's config for step and applies it without a reboot.
func (r *Rotation) apply(ctx context.Context, step Step) (string, error) {
	resp, err := machineconfig.NewMachineConfigServiceClient(r.Client.Conn()).Get(ctx, &machineconfig.GetRequest{})
	if err != nil {
		return "", err
	}

	if len(resp.GetMessages()) != 1 {
		return "", fmt.Errorf("expected one node's config, got %d", len(resp.GetMessages()))
	}

	cfg, err := certs.ParseMachineConfig("the node's config", resp.GetMessages()[0].GetData(), r.now())
	if err != nil {
		return "", err
	}

	if err := r.Edit(cfg, step); err != nil {
		return "", err
	}

	data, err := cfg.Marshal()
	if err != nil {
		return "", err
	}

	applied, err := r.Client.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{
		Data: data, Mode: machine.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		return "", err
	}

	var details string
	for _, m := range applied.GetMessages() {
		details += m.GetModeDetails()
	}

	return details, nil
}

// Edit changes a control plane's config as step does; a config already
// there is left as it is.
func (r *Rotation) Edit(cfg *certs.MachineConfig, step Step) error {
	e := &cfg.Cluster.Etcd
	if e.CA == nil {
		return errors.New("the node has no etcd CA: not a control plane running etcd")
	}

	newCrt := certs.CertAndKey{Crt: r.New.CertPEM}
	oldCrt := certs.CertAndKey{Crt: ca.EncodeCertificate(r.Old)}

	switch step {
	case Accept:
		e.AcceptedCAs = with(e.AcceptedCAs, newCrt)
	case Issue:
		e.CA = &certs.CertAndKey{Crt: r.New.CertPEM, Key: r.New.KeyPEM}
		e.AcceptedCAs = with(without(e.AcceptedCAs, newCrt), oldCrt)
	case Drop:
		e.AcceptedCAs = without(e.AcceptedCAs, oldCrt)
	default:
		return fmt.Errorf("unknown step %d", int(step))
	}

	return nil
}

// Verify checks on the node of ctx that step is in effect: the CAs its
// running etcd member loaded, and the CA of its etcd certificates.
func (r *Rotation) Verify(ctx context.Context, step Step) error {
	list, err := safe.StateListAll[*resourcetypes.CertificateStatus](ctx, r.Client.COSI)
	if err != nil {
		return err
	}

	var trusted []string

	issuers := map[string]string{}

	for s := range list.All() {
		spec := s.TypedSpec()

		switch spec.Kind {
		case resourcetypes.CertKindEtcdTrustedCA:
			trusted = append(trusted, spec.Fingerprint)
		case resourcetypes.CertKindEtcd:
			issuers[s.Metadata().ID()] = spec.IssuerFingerprint
		}
	}

	return check(step, fingerprint(r.Old), fingerprint(r.New.Cert), trusted, issuers)
}

// check is Verify's verdict on what a node reports: the fingerprints of
// the CAs its member loaded, and of the CA of each etcd certificate.
func check(step Step, old, updated string, trusted []string, issuers map[string]string) error {
	var want []string

	wantIssuer := old

	switch step {
	case Accept:
		want = []string{old, updated}
	case Issue:
		want, wantIssuer = []string{old, updated}, updated
	case Drop:
		want, wantIssuer = []string{updated}, updated
	}

	slices.Sort(trusted)
	slices.Sort(want)

	if !slices.Equal(trusted, want) {
		return fmt.Errorf("the etcd member trusts %d CA(s) %v, want %v (is etcd running?)", len(trusted), short(trusted), short(want))
	}

	if len(issuers) == 0 {
		return errors.New("the node reports no etcd certificates")
	}

	for name, fp := range issuers {
		if fp != wantIssuer {
			return fmt.Errorf("%s is issued by %s, want %s", name, shortFP(fp), shortFP(wantIssuer))
		}
	}

	return nil
}

func short(fps []string) []string {
	out := make([]string, len(fps))
	for i, fp := range fps {
		out[i] = shortFP(fp)
	}

	return out
}

// shortFP is a fingerprint's first 16 hex digits, as resource IDs show it.
func shortFP(fp string) string {
	if fp == "" {
		return "a CA the node does not know"
	}

	return fp[:min(16, len(fp))]
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)

	return hex.EncodeToString(sum[:])
}

func (r *Rotation) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}

	return r.Now()
}

func with(list []certs.CertAndKey, c certs.CertAndKey) []certs.CertAndKey {
	if slices.ContainsFunc(list, same(c)) {
		return list
	}

	return append(list, c)
}

func without(list []certs.CertAndKey, c certs.CertAndKey) []certs.CertAndKey {
	return slices.DeleteFunc(slices.Clone(list), same(c))
}

// same matches an entry holding the same certificate, however encoded.
func same(c certs.CertAndKey) func(certs.CertAndKey) bool {
	want, err := ca.ParseCertificate(c.Crt)

	return func(o certs.CertAndKey) bool {
		got, gerr := ca.ParseCertificate(o.Crt)

		return err == nil && gerr == nil && got.Equal(want)
	}
}
