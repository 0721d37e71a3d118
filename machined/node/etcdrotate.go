package node

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/machineapi"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// A config that changes the etcd CAs of a control plane (an etcd CA
// rotation, certs.CheckEtcdCAChange) is put in effect by the etcd package:
// the trusted CAs and certificates in the member's files (SetCAs), then,
// when the running member loaded other CAs than the config trusts, a
// rolling restart (etcd.RestartSlot), its turn taken before anything
// changes. The decision compares with what the
// member loaded, not with the previous config, so that applying the same
// config again retries a restart that failed.

// etcdPlan is what applying a config does to the node's etcd.
type etcdPlan struct {
	e       *etcd.Etcd
	cfg     *certs.MachineConfig
	reissue bool // the issuing etcd CA changes
	restart bool // the running member must load other trusted CAs
	slot    *etcd.RestartSlot
}

// plan decides what cfg changes of the node's etcd; nothing on a node
// that runs none.
func (s *etcdState) plan(cur, cfg *certs.MachineConfig) etcdPlan {
	e, loaded := s.memberAndLoaded()
	if e == nil || cfg.EtcdCA() == nil {
		return etcdPlan{}
	}

	return etcdPlan{
		e: e, cfg: cfg, reissue: certs.EtcdPKIChanges(cur, cfg).Issuer,
		restart: needsTrustRestart(loaded, cfg.EtcdTrustedCAs()),
	}
}

// needsTrustRestart reports whether a running member that loaded the
// trusted CAs loaded (PEM) must restart to trust want: the sets differ.
// A member that does not run (loaded nil) loads want when it starts.
func needsTrustRestart(loaded []byte, want []*x509.Certificate) bool {
	if loaded == nil {
		return false
	}

	have := parseCerts(loaded)
	missing := func(c *x509.Certificate) bool { return !slices.ContainsFunc(have, c.Equal) }

	return len(have) != len(want) || slices.ContainsFunc(want, missing)
}

// describe is the line of an answer that says what happens to etcd.
func (p etcdPlan) describe() string {
	var parts []string

	if p.reissue {
		parts = append(parts, "etcd's certificates are re-issued from the new etcd CA")
	}

	if p.restart {
		parts = append(parts, fmt.Sprintf("the etcd member restarts to trust %d etcd CA(s), one member of the cluster at a time",
			len(p.cfg.EtcdTrustedCAs())))
	}

	if len(parts) == 0 {
		return ""
	}

	return "etcd: " + strings.Join(parts, "; ") + ".\n"
}

// acquire takes the member's turn to restart, if it must, before anything
// changes: it waits for another member's restart, and refuses (nothing
// applied) while the cluster could not take one more member down.
func (p *etcdPlan) acquire(ctx context.Context) error {
	if !p.restart {
		return nil
	}

	slot, err := p.e.AcquireRestart(ctx)
	if err != nil {
		return machineapi.Refuse(machineapi.ErrNotHere, err.Error()+"; nothing was applied")
	}

	p.slot = slot

	return nil
}

// release lets the turn to restart go.
func (p *etcdPlan) release() { p.slot.Release() }

// settle puts the plan in effect and says how the restart went; the plan
// holds its turn to restart (acquire) when it must.
func (n *Node) settle(ctx context.Context, p etcdPlan) (string, error) {
	if p.e == nil {
		return "", nil
	}

	trusted := p.cfg.EtcdTrustedCAs()
	if err := p.e.SetCAs(p.cfg.EtcdCA(), trusted[1:]); err != nil {
		return "", err
	}

	if !p.restart || p.slot == nil {
		return "", nil
	}

	rep, err := p.slot.Restart(ctx, n.services)
	if err != nil {
		return "", machineapi.Refuse(machineapi.ErrNotHere, "the config is applied, but etcd did not restart to load its trusted CAs: "+
			err.Error()+"; apply the config again to retry")
	}

	return fmt.Sprintf("etcd: the member restarted and is healthy (waited %s for other members, down %s).\n",
		rep.Waited.Round(1e6), rep.Down.Round(1e6)), nil
}

// trustedResources are the CAs the running member loaded, one
// certificate resource each ("etcd-trusted-" and the first 16 hex digits
// of its fingerprint): what a rotation checks on each control plane.
func (s *etcdState) trustedResources() []resourceapi.Certificate {
	var out []resourceapi.Certificate

	for _, c := range parseCerts(s.loadedPEM()) {
		sum := sha256.Sum256(c.Raw)
		out = append(out, resourceapi.Certificate{
			ID: "etcd-trusted-" + hex.EncodeToString(sum[:8]), Kind: resourcetypes.CertKindEtcdTrustedCA,
			PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}),
		})
	}

	return out
}

// parseCerts reads the certificates of a PEM bundle, skipping what does
// not parse (the member would not have loaded it either).
func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate

	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}

		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			out = append(out, c)
		}
	}
}

// logSettle logs a failed settle of a rolled-back trial, which has no
// caller to answer.
func (n *Node) logSettle(err error) {
	if err != nil {
		n.log.Error("etcd CAs of the rolled-back config not in effect", slog.String(logkey.Error, err.Error()))
	}
}
